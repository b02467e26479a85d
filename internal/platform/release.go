package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerRelease registers the Release kind: it owns the canary Deployment and Services,
// and watches Components (the one it ships), Alerts (its analysis) and Routes (a Route
// fronting the Component switches the weighting to the gateway).
//
// The Release References its Component (lifecycle.References, ordering only), not a
// Dependency: the engine would hold it while the Component is not Active, and a Component
// is Reconciling exactly while a Release rolls it — the Release could never see its
// rollout fail and roll it back. The reference holds the Release only while the Component
// does not exist (DependenciesReady=False naming it), deletes the Release before the
// Component (the Component's finalizer waits for it), and puts the Release under its
// Component in `kube ctl tree`. The driver's ComponentNotFound wait stays for the moment
// before the engine has seen the Component.
func registerRelease(e *lifecycle.Engine, o Options) error {
	d := &releaseDriver{o: o, idx: newReleaseIndex()}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Release]{Kind: "Release", New: func() *v1alpha1.Release { return &v1alpha1.Release{} },
		Driver: d, MaxConcurrentReconciles: 4, Thrash: busyThrashGuard(),
		References: releaseReferences,
		Owns:       []client.Object{&appsv1.Deployment{}, &corev1.Service{}},
		Watches: []lifecycle.Watch{
			{Object: &v1alpha1.Component{}, Map: func(_ context.Context, obj client.Object) []types.NamespacedName {
				return d.idx.byComponent(obj.GetNamespace(), obj.GetName())
			}},
			{Object: &appsv1.Deployment{}, Map: func(_ context.Context, obj client.Object) []types.NamespacedName {
				if c := obj.GetLabels()[v1alpha1.LabelComponent]; c != "" {
					return d.idx.byComponent(obj.GetNamespace(), c)
				}
				return nil
			}},
			{Object: &v1alpha1.Alert{}, Map: func(_ context.Context, obj client.Object) []types.NamespacedName {
				return d.idx.byAlert(obj.GetNamespace(), obj.GetName())
			}},
			{Object: &v1alpha1.Route{}, Map: func(_ context.Context, obj client.Object) []types.NamespacedName {
				r, ok := obj.(*v1alpha1.Route)
				if !ok {
					return nil
				}
				var out []types.NamespacedName
				for _, rule := range r.Spec.Rules {
					for _, b := range rule.Backends {
						out = append(out, d.idx.byComponent(r.Namespace, b.Component)...)
					}
				}
				return out
			}},
		}})
}

// releaseReferences is the Component a Release ships.
func releaseReferences(rel *v1alpha1.Release) []lifecycle.Ref {
	if rel.Spec.Component == "" {
		return nil
	}
	return []lifecycle.Ref{{Kind: "Component", Namespace: rel.Namespace, Name: rel.Spec.Component}}
}

// busyThrashGuard is the thrash guard of kinds that follow other objects' progress (a
// rollout's Deployments, an Application's Components): their events come in bursts that
// are not thrashing, so the guard defers only at 120 reconciles a minute, for 10 s.
func busyThrashGuard() *lifecycle.ThrashGuard[reconcile.Request] {
	return &lifecycle.ThrashGuard[reconcile.Request]{Max: 120, Window: time.Minute, Defer: 10 * time.Second}
}

type releaseDriver struct {
	o   Options
	idx *releaseIndex
}

// look is one pass's observations and the plan they give; out is non-nil when the
// Release waits for something it does not control (its Component).
type releaseLook struct {
	obs       releaseObs
	plan      releasePlan
	comp      *v1alpha1.Component
	stable    *appsv1.Deployment
	canary    *appsv1.Deployment
	canaryAny bool // canary objects exist
	target    revisionSpec
	cur       revisionSpec
}

func (d *releaseDriver) Observe(ctx context.Context, rel *v1alpha1.Release) (lifecycle.Outcome, error) {
	d.idx.set(rel)
	l, out, err := d.look(ctx, rel)
	if err != nil || out != nil {
		return outcomeOr(out), err
	}
	if d.sideEffects(l) {
		return lifecycle.Outcome{Exists: true, UpToDate: false}, nil
	}
	return d.apply(ctx, rel, l)
}

func (d *releaseDriver) Provision(ctx context.Context, rel *v1alpha1.Release) (lifecycle.Outcome, error) {
	return d.Update(ctx, rel)
}

func (d *releaseDriver) Update(ctx context.Context, rel *v1alpha1.Release) (lifecycle.Outcome, error) {
	l, out, err := d.look(ctx, rel)
	if err != nil || out != nil {
		return outcomeOr(out), err
	}
	return d.apply(ctx, rel, l)
}

// Deprovision deletes the canary objects; the Component stays as it is.
func (d *releaseDriver) Deprovision(ctx context.Context, rel *v1alpha1.Release) (lifecycle.Outcome, error) {
	d.idx.remove(rel)
	if err := d.deleteCanary(ctx, rel); err != nil {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Reason: "Deprovisioned", Message: "canary objects deleted; the Component keeps its spec"}, nil
}

func outcomeOr(o *lifecycle.Outcome) lifecycle.Outcome {
	if o == nil {
		return lifecycle.Outcome{}
	}
	return *o
}

func (d *releaseDriver) now() time.Time {
	if d.o.Now != nil {
		return d.o.Now()
	}
	return time.Now()
}

// look reads what the plan needs.
func (d *releaseDriver) look(ctx context.Context, rel *v1alpha1.Release) (*releaseLook, *lifecycle.Outcome, error) {
	c := d.o.Client
	ns := rel.Namespace
	var comp v1alpha1.Component
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel.Spec.Component}, &comp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "ComponentNotFound",
				Message: "waiting for Component " + rel.Spec.Component, RequeueAfter: 10 * time.Second}, nil
		}
		return nil, nil, fmt.Errorf("read component %s: %w", rel.Spec.Component, err)
	}
	l := &releaseLook{comp: &comp}
	l.cur = revisionSpec{Image: comp.Spec.Image, Env: comp.Spec.Env}
	l.target = mergeRevision(l.cur, rel.Spec.Image, rel.Spec.Env)
	o := releaseObs{
		Now: d.now(), Strategy: rel.Spec.Strategy.Type, Steps: rel.Spec.Strategy.Steps,
		Deadline: DefaultReleaseDeadline, TargetRev: revisionHash(l.target), CurRev: revisionHash(l.cur), Image: l.target.Image,
		Promote: rel.Annotations[v1alpha1.PromoteAnnotation], Status: rel.Status,
	}
	_, o.Abort = rel.Annotations[v1alpha1.AbortAnnotation]
	if rel.Spec.ProgressDeadlineSeconds != nil {
		o.Deadline = time.Duration(*rel.Spec.ProgressDeadlineSeconds) * time.Second
	}
	if a := rel.Spec.Strategy.Analysis; a != nil {
		o.Alerts, o.Analysis = a.Alerts, DefaultAnalysisDuration
		if a.Duration != nil {
			o.Analysis = a.Duration.Duration
		}
	}
	var err error
	if l.stable, err = getDeployment(ctx, c, ns, comp.Name); err != nil {
		return nil, nil, err
	}
	if l.canary, err = getDeployment(ctx, c, ns, canaryName(comp.Name)); err != nil {
		return nil, nil, err
	}
	l.canaryAny = l.canary != nil
	if !l.canaryAny {
		for _, n := range []string{canaryName(comp.Name), stableName(comp.Name)} {
			var s corev1.Service
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &s); err == nil && controlledBy(&s, rel) {
				l.canaryAny = true
			}
		}
	}
	o.Replicas = 1
	if comp.Spec.Replicas != nil {
		o.Replicas = *comp.Spec.Replicas
	}
	if l.stable != nil && l.stable.Spec.Replicas != nil {
		o.Replicas = *l.stable.Spec.Replicas
	}
	if l.stable != nil && o.CurRev == o.TargetRev && mainImage(&l.stable.Spec.Template) == l.target.Image {
		gen := comp.Status.ObservedGeneration >= comp.Generation
		o.Stable.Rolled = gen && deploymentDone(l.stable)
		o.Stable.Failed = gen && deploymentStuck(l.stable)
	}
	if l.canary != nil && controlledBy(l.canary, rel) && mainImage(&l.canary.Spec.Template) == l.target.Image {
		o.Canary.Ready = deploymentDone(l.canary)
		o.Canary.Failed = deploymentStuck(l.canary)
		if l.canary.Spec.Replicas != nil {
			o.Canary.Replicas = *l.canary.Spec.Replicas
		}
	}
	if o.Routed, err = routed(ctx, c, ns, comp.Name); err != nil {
		return nil, nil, err
	}
	if inFlight(rel.Status, o.TargetRev) || !inFlight(rel.Status, rel.Status.CanaryRevision) {
		for _, name := range o.Alerts {
			var a v1alpha1.Alert
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &a); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, nil, fmt.Errorf("read alert %s: %w", name, err)
			}
			if a.Status.State == v1alpha1.AlertFiring {
				o.Firing = name
				break
			}
		}
	}
	track := "stable"
	if rel.Spec.Strategy.Type == v1alpha1.ReleaseCanary && (rel.Status.CurrentStep == nil || int(*rel.Status.CurrentStep) < len(rel.Spec.Strategy.Steps)) {
		track = "canary"
	}
	if o.PodReason, err = podReason(ctx, c, ns, comp.Name, track, l.target.Image); err != nil {
		return nil, nil, err
	}
	l.obs = o
	l.plan = planRelease(o)
	if l.plan.Canary && l.stable == nil {
		return nil, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "WorkloadNotFound",
			Message: fmt.Sprintf("waiting for Deployment %s of Component %s", comp.Name, comp.Name), RequeueAfter: 5 * time.Second}, nil
	}
	if l.plan.Canary {
		if i := mainIndex(l.stable.Spec.Template.Spec.Containers); i >= 0 {
			if _, err := resolveRevisionEnv(envDiff(comp.Spec.Env, l.target.Env), l.stable.Spec.Template.Spec.Containers[i].Env); err != nil {
				return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("the revision's env cannot run as the canary of Component %s: %w", comp.Name, err),
					Reason: "InvalidPlaceholder"}, nil
			}
		}
	}
	if (l.plan.PatchComponent || l.plan.RevertComponent) && comp.Spec.Workload != "" && comp.Spec.Workload != v1alpha1.WorkloadDeployment {
		return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("component %s runs as a %s: a Release ships Deployments only", comp.Name, comp.Spec.Workload),
			Reason: "UnsupportedWorkload"}, nil
	}
	return l, nil, nil
}

// sideEffects is whether carrying out the plan writes anything but the Release's status.
func (d *releaseDriver) sideEffects(l *releaseLook) bool {
	p := l.plan
	if p.ClearAbort || p.ClearPromote || p.PatchComponent || p.RevertComponent || (p.DeleteCanary && l.canaryAny) {
		return true
	}
	if p.Canary {
		want := canaryDeployment(nil, l.comp, l.stable, l.target, p.CanaryReplicas, l.obs.Deadline)
		return l.canary == nil || !canaryUpToDate(l.canary, want)
	}
	return false
}

// apply carries out the plan and writes it into the Release's status.
func (d *releaseDriver) apply(ctx context.Context, rel *v1alpha1.Release, l *releaseLook) (lifecycle.Outcome, error) {
	p := l.plan
	c := d.o.Client
	if p.ClearAbort || p.ClearPromote {
		ann := map[string]any{}
		if p.ClearAbort {
			ann[v1alpha1.AbortAnnotation] = nil
		}
		if p.ClearPromote {
			ann[v1alpha1.PromoteAnnotation] = nil
		}
		if err := mergePatch(ctx, c, rel, map[string]any{"metadata": map[string]any{"annotations": ann}}); err != nil {
			return lifecycle.Outcome{}, fmt.Errorf("clear the promote/abort annotations: %w", err)
		}
	}
	if p.PatchComponent {
		saved, _ := json.Marshal(l.cur)
		patch := map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationRolloutStrategy: p.Strategy, ReleaseStableAnnotation: string(saved)}},
			"spec":     map[string]any{"image": l.target.Image, "env": envOrNil(l.target.Env)},
		}
		if err := mergePatch(ctx, c, l.comp.DeepCopy(), patch); err != nil {
			return lifecycle.Outcome{}, fmt.Errorf("patch component %s: %w", l.comp.Name, err)
		}
	}
	if p.RevertComponent {
		var stable revisionSpec
		if s := l.comp.Annotations[ReleaseStableAnnotation]; s == "" || json.Unmarshal([]byte(s), &stable) != nil || stable.Image == "" {
			p.Events = append(p.Events, releaseEvent{Warn: true, Reason: "RollbackFailed",
				Message: fmt.Sprintf("Component %s has no readable %s annotation: its spec is left as it is", l.comp.Name, ReleaseStableAnnotation)})
		} else {
			patch := map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{ReleaseStableAnnotation: nil}},
				"spec":     map[string]any{"image": stable.Image, "env": envOrNil(stable.Env)},
			}
			if err := mergePatch(ctx, c, l.comp.DeepCopy(), patch); err != nil {
				return lifecycle.Outcome{}, fmt.Errorf("roll back component %s: %w", l.comp.Name, err)
			}
		}
	}
	if p.Canary {
		if err := d.ensureCanary(ctx, rel, l); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	if p.DeleteCanary && l.canaryAny {
		if err := d.deleteCanary(ctx, rel); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	lc := rel.Status.Status
	rel.Status = p.Status
	rel.Status.Status = lc
	limit := DefaultReleaseHistory
	if rel.Spec.HistoryLimit != nil {
		limit = int(*rel.Spec.HistoryLimit)
	}
	rel.Status.History = trimHistory(rel.Status.History, limit)
	for _, ev := range p.Events {
		d.event(rel, ev)
	}
	out := lifecycle.Outcome{Exists: true, UpToDate: true, Reason: rel.Status.ReleasePhase, Message: p.Message, RequeueAfter: p.RequeueAfter}
	if p.Waiting {
		out.Phase = lifecycle.PhaseReconciling
	}
	return out, nil
}

func (d *releaseDriver) event(rel *v1alpha1.Release, ev releaseEvent) {
	d.o.Log.Info("release", "namespace", rel.Namespace, "name", rel.Name, "reason", ev.Reason, "message", ev.Message)
	recordEvent(d.o.Events, rel, !ev.Warn, ev.Reason, "Release", ev.Message)
}

// recordEvent records a Normal (or Warning) Kubernetes Event on obj.
func recordEvent(e *Events, obj client.Object, normal bool, reason, action, msg string) {
	if e == nil {
		return
	}
	typ := corev1.EventTypeWarning
	if normal {
		typ = corev1.EventTypeNormal
	}
	if p := e.r.Load(); p != nil && *p != nil {
		(*p).Eventf(obj, nil, typ, reason, action, "%s", msg)
	}
}

func envOrNil(env []corev1.EnvVar) any {
	if len(env) == 0 {
		return nil
	}
	return env
}

// mergePatch applies a JSON merge patch to obj (updated in place with the answer).
func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, b))
}

func canaryName(component string) string { return component + "-canary" }
func stableName(component string) string { return component + "-stable" }

func getDeployment(ctx context.Context, c client.Reader, ns, name string) (*appsv1.Deployment, error) {
	var dep appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read deployment %s: %w", name, err)
	}
	return &dep, nil
}

func controlledBy(obj metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// routed reports whether a Route of the namespace has the Component as a backend.
func routed(ctx context.Context, c client.Reader, ns, component string) (bool, error) {
	var routes v1alpha1.RouteList
	if err := c.List(ctx, &routes, client.InNamespace(ns)); err != nil {
		return false, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes.Items {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.Backends {
				if b.Component == component {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// podReason says why the pods of a track running image are not ready: the first waiting
// reason that is not a normal start (ImagePullBackOff, CrashLoopBackOff ...) with its
// message, or the scheduler's; "" when none says anything.
func podReason(ctx context.Context, c client.Reader, ns, component, track, image string) (string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelComponent: component, v1alpha1.LabelTrack: track}); err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	reasons := make([]podInfo, 0, len(pods.Items))
	for i := range pods.Items {
		if mainImage(&corev1.PodTemplateSpec{Spec: pods.Items[i].Spec}) != image {
			continue
		}
		reasons = append(reasons, podInfoOf(&pods.Items[i]))
	}
	return PodReason(reasons), nil
}

// podInfo is what PodReason reads of a pod.
type podInfo struct {
	Name             string
	Waiting          []corev1.ContainerStateWaiting
	Unschedulable    string
	LastTerminations []string
}

func podInfoOf(p *corev1.Pod) podInfo {
	pi := podInfo{Name: p.Name}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			pi.Waiting = append(pi.Waiting, *w)
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			pi.LastTerminations = append(pi.LastTerminations, fmt.Sprintf("exit code %d (%s)", t.ExitCode, t.Reason))
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			pi.Unschedulable = strings.TrimSpace(cond.Reason + ": " + cond.Message)
		}
	}
	return pi
}

// PodReason picks the most telling reason among pods: a waiting reason other than a
// normal start, else the scheduler's.
func PodReason(pods []podInfo) string {
	for _, p := range pods {
		for _, w := range p.Waiting {
			switch w.Reason {
			case "", "ContainerCreating", "PodInitializing":
				continue
			}
			msg := fmt.Sprintf("pod %s: %s", p.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if len(p.LastTerminations) > 0 && w.Reason == "CrashLoopBackOff" {
				msg += "; last " + p.LastTerminations[0]
			}
			return msg
		}
	}
	for _, p := range pods {
		if p.Unschedulable != "" {
			return fmt.Sprintf("pod %s: %s", p.Name, p.Unschedulable)
		}
	}
	return ""
}
