package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubeos.dev/kube/pkg/eventbus"
)

// CascadeAnnotation on an object that others depend on makes its deletion delete them
// first ("true"); without it, deletion waits until they are gone.
const CascadeAnnotation = "kubeos.dev/cascade"

// setupKind builds the kind's controller: watch → filter → rate-limited queue → workers →
// reconciler.
func setupKind[O Object](e *Engine, k *kindEntry, mgr manager.Manager, o KindOptions[O]) error {
	r := &reconciler[O]{e: e, k: k, o: o, c: mgr.GetClient()}
	skip := true
	b := builder.ControllerManagedBy(mgr).
		Named("lifecycle-"+strings.ToLower(o.Kind)).
		For(o.New(), builder.WithPredicates(o.Filter.Predicate(), ownFinalizerEcho())).
		WatchesRawSource(source.Channel(k.notify, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: o.MaxConcurrentReconciles,
			RateLimiter:             o.Thrash.Limiter(keepCounts{o.Retry}),
			ReconciliationTimeout:   o.ReconcileTimeout,
			SkipNameValidation:      &skip,
		})
	if !e.tracked.Load() {
		b = b.Watches(o.New(), trackEvents(e, o.Kind))
	}
	for _, owned := range o.Owns {
		b = b.Owns(owned)
	}
	for _, w := range o.Watches {
		b = b.Watches(w.Object, mapHandler(w))
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		k.running.Store(true)
		<-ctx.Done()
		k.running.Store(false)
		return nil
	}))
}

// mapHandler enqueues what w.Map returns for each event of w's objects: at once, or after
// w.Delay (the queue keeps one entry per object, so the events of that spell coalesce).
func mapHandler(w Watch) handler.EventHandler {
	if w.Delay <= 0 {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			return requestsFor(w.Map(ctx, obj))
		})
	}
	add := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if obj == nil {
			return
		}
		for _, r := range requestsFor(w.Map(ctx, obj)) {
			q.AddAfter(r, w.Delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, ev eventCreate, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, ev.Object, q)
		},
		UpdateFunc: func(ctx context.Context, ev eventUpdate, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, ev.ObjectOld, q) // as EnqueueRequestsFromMapFunc: the old object's too
			add(ctx, ev.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, ev eventDelete, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, ev.Object, q)
		},
		GenericFunc: func(ctx context.Context, ev event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, ev.Object, q)
		},
	}
}

func requestsFor(names []types.NamespacedName) []reconcile.Request {
	out := make([]reconcile.Request, len(names))
	for i, n := range names {
		out[i] = reconcile.Request{NamespacedName: n}
	}
	return out
}

// trackEvents feeds the graph and phases from the controller's own informer (no separate
// Track) without enqueueing anything.
func trackEvents(e *Engine, kind string) handler.EventHandler {
	h := e.trackHandler(kind)
	return handler.Funcs{
		CreateFunc: func(_ context.Context, ev eventCreate, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.OnAdd(ev.Object, false)
		},
		UpdateFunc: func(_ context.Context, ev eventUpdate, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.OnUpdate(ev.ObjectOld, ev.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, ev eventDelete, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.OnDelete(ev.Object)
		},
	}
}

// keepCounts hides Forget from controller-runtime, which forgets an item on every
// RequeueAfter; the reconciler forgets after a success itself, so backoff keeps growing
// across failed attempts.
type keepCounts struct {
	*Policy[reconcile.Request]
}

func (keepCounts) Forget(reconcile.Request) {}

type reconciler[O Object] struct {
	e *Engine
	k *kindEntry
	o KindOptions[O]
	c client.Client
}

// Reconcile is one pass of the pipeline for one object.
func (r *reconciler[O]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	start := r.e.opts.Now()
	defer func() { r.e.m.reconcile.WithLabelValues(r.o.Kind).Observe(r.e.opts.Now().Sub(start).Seconds()) }()
	if d := r.o.Thrash.Observe(req); d > 0 {
		r.e.opts.Log.Warn("reconciled too often; deferred", "kind", r.o.Kind, "object", req.String(), "for", d)
		return reconcile.Result{RequeueAfter: d}, nil
	}
	obj := r.o.New()
	if err := r.c.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.o.Retry.Forget(req)
			r.o.Thrash.Forget(req)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	p := &pass[O]{r: r, req: req, obj: obj, trace: eventbus.NewTraceID(),
		ref: Ref{Kind: r.o.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	// The pass's writes carry its trace id to the API (and its audit log) when the client's
	// transport is wrapped with TraceTransport.
	ctx = WithTraceID(ctx, p.trace)
	if obj.GetDeletionTimestamp() != nil {
		return p.finalize(ctx)
	}
	return p.reconcile(ctx)
}

// pass is the state of one reconcile.
type pass[O Object] struct {
	r     *reconciler[O]
	req   reconcile.Request
	obj   O
	ref   Ref
	trace string
}

func (p *pass[O]) reconcile(ctx context.Context) (reconcile.Result, error) {
	r := p.r
	if !controllerutil.ContainsFinalizer(p.obj, Finalizer) {
		// Metadata first, status in a separate write (with the new resourceVersion).
		controllerutil.AddFinalizer(p.obj, Finalizer)
		if err := r.c.Update(ctx, p.obj); err != nil {
			return p.retry(err)
		}
	}
	before := p.obj.DeepCopyObject().(O)
	var (
		out      Outcome
		err      error
		action   = ActionNone
		blocking []Ref
	)
	if cerr := r.e.graph.SetLinks(p.ref, r.o.links(p.obj)); cerr != nil {
		out = Outcome{Terminal: cerr, Reason: "DependencyCycle"}
	} else if blocking = r.e.graph.Holding(p.ref, r.e.Phase); len(blocking) == 0 {
		out, action, err = p.drive(ctx)
	}
	return p.finish(ctx, before, out, action, err, blocking)
}

// drive calls Observe, then what it calls for.
func (p *pass[O]) drive(ctx context.Context) (Outcome, Action, error) {
	d := p.r.o.Driver
	seen, err := d.Observe(ctx, p.obj)
	if err != nil || seen.Terminal != nil {
		return seen, ActionNone, err
	}
	action := Decide(seen, false)
	var out Outcome
	switch action {
	case ActionProvision:
		out, err = d.Provision(ctx, p.obj)
	case ActionUpdate:
		out, err = d.Update(ctx, p.obj)
	default:
		return seen, action, nil
	}
	if out.RequeueAfter == 0 {
		out.RequeueAfter = seen.RequeueAfter
	}
	return out, action, err
}

// finish writes conditions and phase (compare-and-swap on resourceVersion), counts and
// publishes the transition and the outcome, and decides the requeue.
func (p *pass[O]) finish(ctx context.Context, before O, out Outcome, action Action, err error, blocking []Ref) (reconcile.Result, error) {
	r := p.r
	retry := Retry{}
	if err != nil {
		retry = r.o.Retry.Next(p.req, err)
	} else {
		r.o.Retry.Forget(p.req)
	}
	deleting := p.obj.GetDeletionTimestamp() != nil
	st := p.obj.LifecycleStatus()
	from := st.Phase
	res := NextStatus(r.o.Transitions, StatusInput{
		Generation: p.obj.GetGeneration(), Conditions: st.Conditions, Phase: st.Phase, Deleting: deleting,
		Blocking: blocking, Outcome: out, Err: err, GaveUp: retry.GiveUp, Now: r.e.opts.Now(),
	})
	if res.Illegal != nil {
		r.e.m.illegal.WithLabelValues(r.o.Kind).Inc()
		p.publish(ctx, EventIllegalTransition, string(from), string(res.Derived), res.Illegal.Error())
	}
	st.Conditions, st.Phase, st.ObservedGeneration = res.Conditions, res.Phase, p.obj.GetGeneration()
	if !equality.Semantic.DeepEqual(before, p.obj) {
		if werr := r.c.Status().Update(ctx, p.obj); werr != nil {
			return p.retry(werr)
		}
	}
	if from != res.Phase {
		r.e.m.transitions.WithLabelValues(r.o.Kind, phaseLabel(from), string(res.Phase)).Inc()
		p.publish(ctx, EventPhaseChanged, string(from), string(res.Phase), firstNonEmpty(out.Reason, string(action)))
	}
	switch {
	case err != nil:
		p.publish(ctx, EventType(r.o.Kind, "ReconcileFailed"), string(res.Phase), string(res.Phase), err.Error())
	case action != ActionNone || out.Terminal != nil:
		reason := out.Reason
		if reason == "" {
			reason = map[Action]string{ActionProvision: "Provisioned", ActionUpdate: "Updated"}[action]
		}
		if out.Terminal != nil && reason == "" {
			reason = "Failed"
		}
		p.publish(ctx, EventType(r.o.Kind, reason), string(res.Phase), string(res.Phase), out.Message)
	}
	// Requeue: the earliest of what is asked for.
	var after []time.Duration
	switch {
	case err != nil && !retry.GiveUp:
		after = append(after, max(retry.After, time.Millisecond))
	case res.Derived != res.Phase && res.Illegal == nil:
		after = append(after, time.Millisecond) // walking a legal path one write at a time
	}
	if out.RequeueAfter > 0 {
		after = append(after, out.RequeueAfter)
	}
	if out.Requeue {
		after = append(after, time.Second)
	}
	if res.Phase == PhaseActive && r.o.PeriodicRequeue > 0 {
		after = append(after, r.o.PeriodicRequeue)
	}
	if len(blocking) > 0 {
		after = append(after, 30*time.Second) // dependencies wake us; this is the safety net
	}
	r.e.sum.reconciled(p.ref, errors.Join(err, out.Terminal), r.e.opts.Now(), minPositive(after))
	return reconcile.Result{RequeueAfter: minPositive(after)}, nil
}

// finalize runs the finalizer: wait for dependents (or delete them with the cascade
// annotation), Deprovision, then remove the finalizer. Past the deletion timeout the object
// is marked Stalled with an Event and a metric, and still retried.
func (p *pass[O]) finalize(ctx context.Context) (reconcile.Result, error) {
	r := p.r
	if !controllerutil.ContainsFinalizer(p.obj, Finalizer) {
		return reconcile.Result{}, nil
	}
	since := p.obj.GetDeletionTimestamp().Time
	r.e.m.finalizers.set(p.ref, since)
	age := r.e.opts.Now().Sub(since)
	before := p.obj.DeepCopyObject().(O)
	var dependents []Ref
	for _, d := range r.e.graph.DependentLinks(p.ref) {
		if d.Link.HoldsTeardown() && r.e.exists(d.Ref) {
			dependents = append(dependents, d.Ref)
		}
	}
	var (
		out Outcome
		err error
	)
	if len(dependents) > 0 {
		names := make([]string, len(dependents))
		for i, d := range dependents {
			names[i] = d.String()
		}
		out = Outcome{Phase: PhaseReconciling, Reason: "WaitingForDependents", Message: "waiting for dependents to be deleted: " + strings.Join(names, ", ")}
		if p.obj.GetAnnotations()[CascadeAnnotation] == "true" {
			for _, d := range dependents {
				if dobj := r.e.NewObject(d.Kind); dobj != nil {
					dobj.SetNamespace(d.Namespace)
					dobj.SetName(d.Name)
					if derr := r.c.Delete(ctx, dobj); derr != nil && !apierrors.IsNotFound(derr) {
						err = errors.Join(err, derr)
					}
				}
			}
		}
	} else {
		out, err = r.o.Driver.Deprovision(ctx, p.obj)
		if members := p.remainingMembers(); err == nil && out.Terminal == nil && out.Phase != PhaseReconciling && out.Phase != PhaseFailed && len(members) > 0 {
			out = Outcome{Phase: PhaseReconciling, Reason: "WaitingForMembers", Message: "waiting for members to be deleted: " + strings.Join(members, ", ")}
		}
		if err == nil && out.Terminal == nil && out.Phase != PhaseReconciling && out.Phase != PhaseFailed {
			controllerutil.RemoveFinalizer(p.obj, Finalizer)
			if uerr := r.c.Update(ctx, p.obj); uerr != nil {
				return p.retry(uerr)
			}
			r.o.Retry.Forget(p.req)
			r.e.m.finalizers.clear(p.ref)
			p.publish(ctx, EventType(r.o.Kind, firstNonEmpty(out.Reason, "Deprovisioned")), string(PhaseDeleting), "", out.Message)
			return reconcile.Result{}, nil
		}
	}
	if age > r.o.DeletionTimeout && out.Terminal == nil {
		msg := fmt.Sprintf("deletion has not finished after %s (timeout %s): %s", age.Round(time.Second), r.o.DeletionTimeout, firstNonEmpty(out.Message, errString(err)))
		out.Terminal = errors.New(msg)
		out.Reason = "DeletionTimeout"
		if !stalled(before) {
			r.e.m.stalled.WithLabelValues(r.o.Kind).Inc()
			if rec := r.e.recorder(); rec != nil {
				rec.Eventf(p.obj, nil, corev1.EventTypeWarning, "DeletionStalled", "Deprovision", msg)
			}
			p.publish(ctx, EventDeletionStalled, string(PhaseDeleting), string(PhaseDeleting), msg)
		}
	}
	res, ferr := p.finish(ctx, before, out, ActionDeprovision, err, nil)
	if ferr != nil {
		return res, ferr
	}
	// Dependents going away wake us; retry anyway, and look again at the timeout.
	next := []time.Duration{res.RequeueAfter, 30 * time.Second}
	if age <= r.o.DeletionTimeout {
		next = append(next, r.o.DeletionTimeout-age+time.Millisecond)
	}
	return reconcile.Result{RequeueAfter: minPositive(next)}, nil
}

// remainingMembers names what the object contains (link Contains) that still exists: its
// deletion waits for them.
func (p *pass[O]) remainingMembers() []string {
	var out []string
	for _, d := range p.r.e.graph.Links(p.ref) {
		if d.Link.HoldsDependentTeardown() && p.r.e.exists(d.Ref) {
			out = append(out, d.String())
		}
	}
	return out
}

// retry handles a failed write: conflicts at once (a fresh read fixes them), others through
// the kind's policy.
func (p *pass[O]) retry(err error) (reconcile.Result, error) {
	rt := p.r.o.Retry.Next(p.req, err)
	if rt.GiveUp {
		return reconcile.Result{}, err // the queue's rate limiter backs off
	}
	return reconcile.Result{RequeueAfter: max(rt.After, time.Millisecond)}, nil
}

func (p *pass[O]) publish(ctx context.Context, typ, from, to, reason string) {
	p.r.e.publish(ctx, eventbus.Event{TraceID: p.trace, Type: typ, Kind: p.r.o.Kind, Namespace: p.ref.Namespace,
		Name: p.ref.Name, UID: string(p.obj.GetUID()), From: from, To: to, Reason: reason})
}

func stalled(o Object) bool {
	for _, c := range o.LifecycleStatus().Conditions {
		if c.Type == ConditionStalled && c.Status == "True" {
			return true
		}
	}
	return false
}

func containsFinalizer(o client.Object) bool { return controllerutil.ContainsFinalizer(o, Finalizer) }

func phaseLabel(p Phase) string {
	if p == PhaseNone {
		return "None"
	}
	return string(p)
}

func minPositive(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
