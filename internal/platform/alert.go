package platform

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/alerting"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// The Alert kind: its driver registers each Alert's rule with one evaluator per process
// and reports the evaluator's state in status. The evaluator runs only while this process's
// engine reconciles Alerts (the engine runs under leader election): every reconcile renews
// its rule's lease, the evaluator starts with the first lease and stops, dropping its rules,
// when none has been renewed for a few intervals (leadership lost, or no Alerts left).

func init() {
	kindValidators["Alert"] = validateAlert
}

// alertLeaseRounds is how many evaluation intervals a rule lives without a reconcile.
const alertLeaseRounds = 4

// registerAlert registers the Alert kind (PromQL alerting rules). The evaluation interval is
// the kind's PeriodicRequeue tuning (default 15 s): each Alert is observed once per round.
func registerAlert(e *lifecycle.Engine, o Options) error {
	iv := o.Kinds["Alert"].PeriodicRequeue
	if iv <= 0 {
		iv = alertInterval
	}
	rt, err := newAlertRuntime(o, iv)
	if err != nil {
		return err
	}
	go ensureDefaultAlerts(o)
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Alert]{Kind: "Alert", New: func() *v1alpha1.Alert { return &v1alpha1.Alert{} },
		Driver: &alertDriver{rt: rt, o: o}, MaxConcurrentReconciles: 4, PeriodicRequeue: iv})
}

// alertInterval is the default evaluation interval, Prometheus's usual.
const alertInterval = 15 * time.Second

// alertRuntime is the process's evaluator and the term it runs in.
type alertRuntime struct {
	ev   *alerting.Evaluator
	now  func() time.Time
	term func() context.Context

	mu      sync.Mutex
	leases  map[string]time.Time // rule key → last reconcile
	running bool
	stop    context.CancelFunc
	done    chan struct{}
}

func newAlertRuntime(o Options, interval time.Duration) (*alertRuntime, error) {
	// The server's Gatherer is its metrics registry: the evaluator's own metrics go there too.
	reg, _ := o.Gatherer.(prometheus.Registerer)
	ev, err := alerting.New(alerting.Options{Gatherer: o.Gatherer, Bus: o.Bus, Log: o.Log, Registerer: reg, Interval: interval})
	if err != nil {
		return nil, err
	}
	return &alertRuntime{ev: ev, now: o.Now, term: o.Term, leases: map[string]time.Time{}}, nil
}

// set registers r and renews its lease, starting the evaluator if it is not running.
func (rt *alertRuntime) set(r alerting.Rule) {
	rt.ev.Set(r)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.leases[r.Key] = rt.now()
	if rt.running {
		return
	}
	term := context.Background()
	if rt.term != nil {
		term = rt.term()
	}
	ctx, cancel := context.WithCancel(term)
	rt.running, rt.stop, rt.done = true, cancel, make(chan struct{})
	go rt.run(ctx, rt.done)
}

func (rt *alertRuntime) remove(key string) {
	rt.ev.Remove(key)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	delete(rt.leases, key)
}

// run evaluates every interval and expires rules whose lease lapsed; it returns, stopping
// the sampling, when no rule is left.
func (rt *alertRuntime) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	iv := rt.ev.Interval()
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		rt.ev.EvaluateOnce(ctx, rt.now())
		select {
		case <-ctx.Done():
			rt.endTerm(done)
			return
		case <-t.C:
		}
		rt.mu.Lock()
		for k, at := range rt.leases {
			if rt.now().Sub(at) > alertLeaseRounds*iv {
				delete(rt.leases, k)
				rt.ev.Remove(k)
			}
		}
		if len(rt.leases) == 0 {
			rt.running = false
			rt.stop()
			rt.mu.Unlock()
			return
		}
		rt.mu.Unlock()
	}
}

// endTerm forgets the rules when the leadership term (or Stop) ended the run: the next
// term's reconciles register them again, each starting inactive (as Prometheus's rules do
// after a restart that kept no state).
func (rt *alertRuntime) endTerm(done chan struct{}) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.done != done {
		return // a newer run has started
	}
	rt.running = false
	for k := range rt.leases {
		delete(rt.leases, k)
		rt.ev.Remove(k)
	}
}

// Stop ends the evaluator's run and waits for it (tests; in the server the leadership term ends it).
func (rt *alertRuntime) Stop() {
	rt.mu.Lock()
	stop, done := rt.stop, rt.done
	rt.running = false
	rt.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// alertDriver registers Alerts' rules with the evaluator.
type alertDriver struct {
	rt *alertRuntime
	o  Options
}

var _ lifecycle.Driver[*v1alpha1.Alert] = (*alertDriver)(nil)

func alertKey(a *v1alpha1.Alert) string { return a.Namespace + "/" + a.Name }

// Observe renews the rule, copies the evaluator's state into status, and comes back after
// one interval; a rule not yet registered is provisioned.
func (d *alertDriver) Observe(ctx context.Context, a *v1alpha1.Alert) (lifecycle.Outcome, error) {
	if _, ok := d.rt.ev.Status(alertKey(a)); !ok {
		return lifecycle.Outcome{}, nil
	}
	r, out, err := d.rule(ctx, a)
	if err != nil || out.Terminal != nil {
		return out, err
	}
	d.rt.set(r)
	return d.report(a), nil
}

// Provision registers the rule.
func (d *alertDriver) Provision(ctx context.Context, a *v1alpha1.Alert) (lifecycle.Outcome, error) {
	r, out, err := d.rule(ctx, a)
	if err != nil || out.Terminal != nil {
		return out, err
	}
	d.rt.set(r)
	out = d.report(a)
	out.Reason = "RuleRegistered"
	return out, nil
}

// Update re-registers the rule (Observe always refreshes it).
func (d *alertDriver) Update(ctx context.Context, a *v1alpha1.Alert) (lifecycle.Outcome, error) {
	return d.Provision(ctx, a)
}

// Deprovision drops the rule.
func (d *alertDriver) Deprovision(_ context.Context, a *v1alpha1.Alert) (lifecycle.Outcome, error) {
	d.rt.remove(alertKey(a))
	return lifecycle.Outcome{Reason: "RuleRemoved"}, nil
}

// report copies the rule's state into a's status.
func (d *alertDriver) report(a *v1alpha1.Alert) lifecycle.Outcome {
	st, _ := d.rt.ev.Status(alertKey(a))
	a.Status.State = string(st.State)
	a.Status.ActiveSince, a.Status.LastEvaluation, a.Status.Value = nil, nil, ""
	if st.State != alerting.StateInactive {
		a.Status.ActiveSince = &metav1.Time{Time: st.ActiveSince}
		a.Status.Value = strconv.FormatFloat(st.Value, 'g', -1, 64)
	}
	if !st.LastEvaluation.IsZero() {
		a.Status.LastEvaluation = &metav1.Time{Time: st.LastEvaluation}
	}
	a.Status.LastError = st.LastError
	out := lifecycle.Outcome{Exists: true, UpToDate: true, RequeueAfter: d.rt.ev.Interval(), Reason: "Evaluating"}
	if st.LastError != "" {
		out.Message = st.LastError
	}
	return out
}

// rule builds a's rule: receivers and the Prometheus entry resolved for a's tenant.
func (d *alertDriver) rule(ctx context.Context, a *v1alpha1.Alert) (alerting.Rule, lifecycle.Outcome, error) {
	if errs := alertSpecErrors(&a.Spec, field.NewPath("spec")); len(errs) > 0 {
		return alerting.Rule{}, lifecycle.Outcome{Terminal: errs.ToAggregate(), Reason: "InvalidRule"}, nil
	}
	r := alerting.Rule{Key: alertKey(a), Namespace: a.Namespace, Name: a.Name, UID: string(a.UID), Expr: a.Spec.Expr,
		Labels: maps.Clone(a.Spec.Labels), Annotations: maps.Clone(a.Spec.Annotations),
		GeneratorURL: "/apis/kubeos.dev/v1alpha1/namespaces/" + a.Namespace + "/alerts/" + a.Name}
	if a.Spec.For != nil {
		r.For = a.Spec.For.Duration
	}
	if a.Spec.KeepFiringFor != nil {
		r.KeepFiringFor = a.Spec.KeepFiringFor.Duration
	}
	if a.Spec.Server != "" {
		u, err := d.serverURL(ctx, a, "prometheus", a.Spec.Server)
		if err != nil {
			return r, lifecycle.Outcome{}, err
		}
		r.Prometheus = u
	}
	for _, rc := range a.Spec.Receivers {
		switch {
		case rc.Webhook != nil:
			r.Receivers = append(r.Receivers, &alerting.Webhook{URL: rc.Webhook.URL, Receiver: a.Namespace + "/" + a.Name})
		case rc.Alertmanager != nil:
			u, err := d.serverURL(ctx, a, "alertmanager", rc.Alertmanager.Server)
			if err != nil {
				return r, lifecycle.Outcome{}, err
			}
			r.Receivers = append(r.Receivers, &alerting.Alertmanager{URL: u})
		case rc.Events != nil:
			r.Receivers = append(r.Receivers, &alertEvents{c: d.o.Client, ref: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(),
				Kind: "Alert", Namespace: a.Namespace, Name: a.Name, UID: a.UID}})
		}
	}
	return r, lifecycle.Outcome{}, nil
}

// serverURL resolves a server entry of kind for a's tenant.
func (d *alertDriver) serverURL(ctx context.Context, a *v1alpha1.Alert, kind, name string) (string, error) {
	tenant, err := TenantOf(ctx, d.o.Client, a.Namespace)
	if err != nil {
		return "", err
	}
	e, err := d.o.Servers.Resolve(ctx, kind, name, tenant)
	if err != nil {
		return "", fmt.Errorf("%s server %q: %w", kind, name, err)
	}
	return e.URL, nil
}

// validateAlert is the Alert's admission check: the expression parses (the parser's message
// in the 422), durations are durations, receivers name one kind each.
func validateAlert(ctx context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	var a v1alpha1.Alert
	spec := field.NewPath("spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &a); err != nil {
		return field.ErrorList{field.Invalid(spec, nil, err.Error())}
	}
	errs := alertSpecErrors(&a.Spec, spec)
	// spec.server is checked for every kind by checkKind; the receivers' Alertmanager
	// entries here: a tenant may name only the entries open to it.
	info := AdmissionContext(ctx)
	for i, r := range a.Spec.Receivers {
		if r.Alertmanager == nil || info.Reader == nil {
			continue
		}
		p := spec.Child("receivers").Index(i).Child("alertmanager", "server")
		if _, err := servers.Resolve(ctx, info.Reader, servers.Alertmanager, r.Alertmanager.Server, info.Tenant); err != nil {
			switch {
			case servers.IsNotAllowed(err):
				errs = append(errs, field.Forbidden(p, err.Error()))
			case servers.IsNotFound(err):
				errs = append(errs, field.NotFound(p, r.Alertmanager.Server))
			default:
				errs = append(errs, field.InternalError(p, err))
			}
		}
	}
	return errs
}

func alertSpecErrors(s *v1alpha1.AlertSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if err := alerting.ValidateExpr(s.Expr); err != nil {
		errs = append(errs, field.Invalid(p.Child("expr"), s.Expr, err.Error()))
	}
	for name, d := range map[string]*metav1.Duration{"for": s.For, "keepFiringFor": s.KeepFiringFor} {
		if d != nil && d.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child(name), d.Duration.String(), "must not be negative"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		if !model.LegacyValidation.IsValidLabelName(k) || k == model.MetricNameLabel {
			errs = append(errs, field.Invalid(p.Child("labels").Key(k), k, "not a Prometheus label name"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Annotations)) {
		if err := alerting.ValidateTemplate(s.Annotations[k]); err != nil {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), s.Annotations[k], err.Error()))
		}
	}
	for i, r := range s.Receivers {
		rp := p.Child("receivers").Index(i)
		n := 0
		for _, set := range []bool{r.Webhook != nil, r.Alertmanager != nil, r.Events != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(rp, n, "a receiver is exactly one of webhook, alertmanager or events"))
			continue
		}
		if r.Webhook != nil {
			u, err := url.Parse(r.Webhook.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, field.Invalid(rp.Child("webhook", "url"), "(redacted)", "must be an absolute http or https URL"))
			}
		}
	}
	return errs
}

// alertEvents records a Kubernetes Event on the Alert for each notification.
type alertEvents struct {
	c   client.Client
	ref corev1.ObjectReference
}

func (e *alertEvents) Name() string      { return "events" }
func (e *alertEvents) Type() string      { return alerting.ReceiverEvents }
func (e *alertEvents) WantsResend() bool { return false }

func (e *alertEvents) Notify(ctx context.Context, n alerting.Notification) error {
	firing, resolved := 0, 0
	for _, a := range n.Alerts {
		if a.State == alerting.StateFiring {
			firing++
		} else {
			resolved++
		}
	}
	reason, typ := "AlertResolved", corev1.EventTypeNormal
	if firing > 0 {
		reason, typ = "AlertFiring", corev1.EventTypeWarning
	}
	msg := fmt.Sprintf("%d firing, %d resolved", firing, resolved)
	if len(n.Alerts) > 0 {
		a := n.Alerts[0]
		msg += ": " + a.Labels.String()
		if s := a.Annotations["summary"]; s != "" {
			msg += " — " + s
		}
	}
	ts := metav1.NewTime(n.Now)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", e.ref.Name, n.Now.UnixNano()), Namespace: e.ref.Namespace}, // as client-go's recorder names them
		InvolvedObject: e.ref, Reason: reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: ts, LastTimestamp: ts, Source: corev1.EventSource{Component: "kube-alerting"},
		ReportingController: "kubeos.dev/alerting", Action: "Notify",
	}
	if err := e.c.Create(ctx, ev); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	return nil
}

// DefaultAlerts are the Alerts Kube ships for its own health, in kube-system, over the
// lifecycle engine's and the event bus's metrics; Kube creates those that are absent and
// never overwrites them (a platform edits or deletes them).
func DefaultAlerts() []*v1alpha1.Alert {
	mk := func(name, expr string, forD time.Duration, severity, summary string) *v1alpha1.Alert {
		return &v1alpha1.Alert{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Alert"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{LabelDefaultAlert: "true"}},
			Spec: v1alpha1.AlertSpec{Expr: expr, For: &metav1.Duration{Duration: forD},
				Labels:      map[string]string{"severity": severity},
				Annotations: map[string]string{"summary": summary},
				Receivers:   []v1alpha1.AlertReceiver{{Events: &v1alpha1.AlertEvents{}}}},
		}
	}
	return []*v1alpha1.Alert{
		mk("kube-finalizer-stuck", `max by (kind) (kube_lifecycle_finalizer_age_seconds) > 900`, 5*time.Minute, "warning",
			"a {{ $labels.kind }} has waited {{ $value }}s for its kubeos.dev/lifecycle finalizer"),
		mk("kube-deletion-stalled", `increase(kube_lifecycle_deletion_stalled_total[15m]) > 0`, 0, "warning",
			"{{ $labels.kind }} deletions passed their deletion timeout"),
		mk("kube-illegal-transitions", `increase(kube_lifecycle_illegal_transitions_total[10m]) > 0`, 0, "warning",
			"the engine refused illegal phase transitions of {{ $labels.kind }}"),
		mk("kube-reconcile-errors", `sum by (type) (rate(eventbus_events_total{type=~".+_reconcile_failed",status="published"}[5m])) > 0.1`,
			10*time.Minute, "warning", "{{ $labels.type }}: {{ $value }} reconcile failures per second"),
		mk("kube-event-bus-down", `min by (backend) (kube_eventbus_backend_up) == 0`, time.Minute, "critical",
			"the {{ $labels.backend }} event bus backend is unreachable; events are buffered"),
		mk("kube-events-dropped", `sum by (type) (increase(eventbus_events_total{status="dropped"}[5m])) > 0`, 0, "warning",
			"events of type {{ $labels.type }} were dropped by a full buffer"),
	}
}

// LabelDefaultAlert marks the Alerts Kube created from DefaultAlerts.
const LabelDefaultAlert = "kubeos.dev/default-alert"

// defaultAlertsDeadline bounds how long a starting server tries to create the default Alerts.
const defaultAlertsDeadline = 5 * time.Minute

// ensureDefaultAlerts creates the default Alerts once the API serves them (the client is the
// server's loopback, not up yet when the kinds are registered), retrying for a bounded time.
// Every server does it; creating what exists is a no-op.
func ensureDefaultAlerts(o Options) {
	if o.Client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultAlertsDeadline)
	defer cancel()
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		err := EnsureDefaultAlerts(ctx, o.Client)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			o.Log.Warn("default alerts not created", "err", err)
			return
		case <-time.After(delay):
		}
	}
}

// EnsureDefaultAlerts creates the default Alerts that do not exist.
func EnsureDefaultAlerts(ctx context.Context, c client.Client) error {
	for _, a := range DefaultAlerts() {
		if err := c.Create(ctx, a); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("default alert %s: %w", a.Name, err)
		}
	}
	return nil
}
