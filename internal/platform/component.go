package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// The Component driver. Every pass reads what the Component uses (connection Secrets'
// keys, Volumes' claims, the Application that claims it) — owned objects, Applications,
// Volumes, Releases and pods from the informer cache (componentReads), checked against
// the newest event the engine delivered for them — builds the objects it wants
// (buildComponent, pure), and compares each with the live one by a server-side apply dry
// run (so fields defaulted by the server or owned by other managers — an HPA's replicas —
// never count as drift); a pair found equal — or just applied, the apply's answer being
// the live object — is remembered by its signature (the desired body, the live object's
// generation or resourceVersion, labels and owner references), so the passes an owned
// object's status updates bring skip the dry run (after a restart, one dry run per object
// learns it again). Writes are server-side applies with field manager
// componentFieldManager; owned objects no longer wanted (another workload kind, a Service
// after exposes went empty, an HPA after autoscaling went) are deleted.
//
// Deprovision deletes the workload with foreground propagation and waits until it is gone
// — that is, until its pods have stopped — so that what the Component uses (a Database)
// is torn down only after no pod uses it any more. The Service and HPA go at once.

// componentFieldManager is the server-side apply field manager of the driver's writes.
const componentFieldManager = "kube-component"

// componentNotReadyRequeue is how often a Component whose pods are not ready is looked at
// again: pods' waiting reasons (ImagePullBackOff) change without the workload changing.
const componentNotReadyRequeue = 10 * time.Second

// componentThrashGuard defers a Component reconciled more than 120 times in a minute by
// 10 s: a pass reads from the cache and is cheap, and a rolling Deployment's status moves
// a few times per replica (the default, 20 → deferred by a minute, held a drift repair
// back for a minute after a rollout).
func componentThrashGuard() *lifecycle.ThrashGuard[reconcile.Request] {
	return &lifecycle.ThrashGuard[reconcile.Request]{Max: 120, Window: time.Minute, Defer: 10 * time.Second}
}

// registerComponent registers the Component kind.
func registerComponent(e *lifecycle.Engine, o Options) error {
	d := &componentDriver{o: o, reads: &componentReads{cache: o.cached, direct: o.Client}}
	watches := []lifecycle.Watch{
		{Object: &v1alpha1.Application{}, Map: d.mapApplication},
		{Object: &v1alpha1.Release{}, Map: d.mapRelease},
		{Object: &v1alpha1.Volume{}, Map: d.mapVolume},
	}
	// The owned types: what KindOptions.Owns would do (a change reconciles the controlling
	// Component), with the event's version recorded first (componentReads).
	for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &batchv1.Job{}, &batchv1.CronJob{}, &corev1.Service{},
		&autoscalingv2.HorizontalPodAutoscaler{}} {
		watches = append(watches, lifecycle.Watch{Object: obj, Map: d.reads.ownerMap})
	}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Component]{Kind: "Component", New: func() *v1alpha1.Component { return &v1alpha1.Component{} },
		Driver: d, MaxConcurrentReconciles: 32, Dependencies: componentDependencies, // reconciles wait on the API, not the CPU
		Thrash: componentThrashGuard(), Watches: watches})
}

// componentDependencies are the objects of spec.uses, all in the Component's namespace.
func componentDependencies(c *v1alpha1.Component) []lifecycle.Ref {
	out := make([]lifecycle.Ref, 0, len(c.Spec.Uses))
	for _, u := range c.Spec.Uses {
		out = append(out, lifecycle.Ref{Kind: u.Kind, Namespace: c.Namespace, Name: u.Name})
	}
	return out
}

type componentDriver struct {
	o Options
	// verified remembers, per Component UID and kind, the signature (componentSignature)
	// of the last desired/live pair a dry run found equal: while neither side moves, a pass
	// skips the dry run (an owned object's status updates do not count as moving).
	verified sync.Map
	// reads is where owned objects, Applications, Releases, Volumes and pods are read.
	reads *componentReads
	// apps remembers, per Application UID, the generation last mapped (mapApplication).
	apps sync.Map
}

var _ lifecycle.Driver[*v1alpha1.Component] = (*componentDriver)(nil)

// componentWorkloadTypes are the workload kinds with their Go types.
var componentWorkloadTypes = map[string]func() client.Object{
	v1alpha1.WorkloadDeployment:  func() client.Object { return &appsv1.Deployment{} },
	v1alpha1.WorkloadStatefulSet: func() client.Object { return &appsv1.StatefulSet{} },
	v1alpha1.WorkloadJob:         func() client.Object { return &batchv1.Job{} },
	v1alpha1.WorkloadCronJob:     func() client.Object { return &batchv1.CronJob{} },
}

var componentWorkloadGVKs = map[string]schema.GroupVersionKind{
	v1alpha1.WorkloadDeployment:  appsv1.SchemeGroupVersion.WithKind("Deployment"),
	v1alpha1.WorkloadStatefulSet: appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
	v1alpha1.WorkloadJob:         batchv1.SchemeGroupVersion.WithKind("Job"),
	v1alpha1.WorkloadCronJob:     batchv1.SchemeGroupVersion.WithKind("CronJob"),
}

var (
	componentServiceGVK = corev1.SchemeGroupVersion.WithKind("Service")
	componentHPAGVK     = autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
)

// inputs reads what c uses and the Application that claims it. A non-nil outcome is a
// wait (Reconciling) or a terminal problem.
func (d *componentDriver) inputs(ctx context.Context, c *v1alpha1.Component) (componentInputs, *lifecycle.Outcome, error) {
	var in componentInputs
	for _, u := range c.Spec.Uses {
		r := componentUseInput{ComponentUse: u}
		switch {
		case slices.Contains(componentDataKinds, u.Kind):
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(u.Kind))
			if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: u.Name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					return in, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "UseNotFound",
						Message: fmt.Sprintf("waiting for %s %s", u.Kind, u.Name), RequeueAfter: 5 * time.Second}, nil
				}
				return in, nil, fmt.Errorf("read %s %s: %w", u.Kind, u.Name, err)
			}
			r.Secret, _, _ = unstructured.NestedString(obj.Object, "status", "connectionSecret")
			if r.Secret == "" {
				r.Secret = v1alpha1.ConnectionSecretName(u.Name, u.Kind)
			}
			var s corev1.Secret
			if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: r.Secret}, &s); err != nil {
				if apierrors.IsNotFound(err) {
					return in, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "ConnectionNotReady",
						Message: fmt.Sprintf("waiting for Secret %s, the connection of %s %s", r.Secret, u.Kind, u.Name), RequeueAfter: 5 * time.Second}, nil
				}
				return in, nil, fmt.Errorf("read the connection Secret %s of %s %s: %w", r.Secret, u.Kind, u.Name, err)
			}
			r.Keys = make([]string, 0, len(s.Data))
			for k := range s.Data {
				r.Keys = append(r.Keys, k)
			}
			sort.Strings(r.Keys)
		case u.Kind == "Volume":
			var v v1alpha1.Volume
			found, err := d.reads.get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: u.Name}, &v)
			if err != nil {
				return in, nil, err
			}
			if !found {
				return in, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "UseNotFound",
					Message: "waiting for Volume " + u.Name, RequeueAfter: 5 * time.Second}, nil
			}
			r.Volume, r.Claim = &v, v.Status.ClaimName
			if r.Claim == "" {
				r.Claim = u.Name + "-volume" // the Volume kind's claim name
			}
		default:
			return in, &lifecycle.Outcome{Terminal: fmt.Errorf("spec.uses: kind %q: want one of %s", u.Kind, strings.Join(componentUseKinds, ", ")),
				Reason: "InvalidUse"}, nil
		}
		in.Uses = append(in.Uses, r)
	}
	if name := c.Labels[componentLabelApplication]; name != "" {
		var app v1alpha1.Application
		found, err := d.reads.get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &app)
		if err != nil {
			return in, nil, err
		}
		if found {
			in.App = &app
		}
	}
	return in, nil, nil
}

// release is the Release of c (spec.component == c's name), "" when none.
func (d *componentDriver) release(ctx context.Context, c *v1alpha1.Component) (string, error) {
	rels, err := d.reads.releasesOf(ctx, c.Namespace, c.Name)
	if err != nil {
		return "", err
	}
	for _, r := range rels {
		if r.Spec.Component == c.Name && r.DeletionTimestamp == nil {
			return r.Name, nil
		}
	}
	return "", nil
}

// componentApplyBody turns a desired typed object into the body of a server-side apply.
func componentApplyBody(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "jobTemplate", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "jobTemplate", "spec", "template", "metadata", "creationTimestamp")
	if tmpls, ok, _ := unstructured.NestedSlice(m, "spec", "volumeClaimTemplates"); ok {
		for _, t := range tmpls {
			if tm, ok := t.(map[string]any); ok {
				unstructured.RemoveNestedField(tm, "metadata", "creationTimestamp")
				delete(tm, "status")
			}
		}
		_ = unstructured.SetNestedSlice(m, tmpls, "spec", "volumeClaimTemplates")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// live reads the object of gvk named like c (nil when absent).
func (d *componentDriver) live(ctx context.Context, c *v1alpha1.Component, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if found, err := d.reads.get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, u); err != nil || !found {
		return nil, err
	}
	return u, nil
}

func componentControls(obj metav1.Object, c *v1alpha1.Component) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == c.UID
}

// componentObjectState is one desired object compared with its live version.
type componentObjectState struct {
	want *unstructured.Unstructured
	live *unstructured.Unstructured
	// differs: the apply would change the live object; immutable: it cannot (a Job's
	// template), the object must be replaced.
	differs, immutable bool
}

// compare dry-runs the apply of want and reports whether it would change live.
func (d *componentDriver) compare(ctx context.Context, want, live *unstructured.Unstructured) (differs, immutable bool, err error) {
	if needsRecreateSwitch(want, live) {
		return true, false, nil // the apply alone would be refused (see prepare)
	}
	res := want.DeepCopy()
	if err := d.o.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(res), client.FieldOwner(componentFieldManager),
		client.ForceOwnership, client.DryRunAll); err != nil {
		if apierrors.IsInvalid(err) && want.GetKind() == "Job" {
			return true, true, nil
		}
		return false, false, fmt.Errorf("dry-run apply %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	same := equality.Semantic.DeepEqual(res.Object["spec"], live.Object["spec"]) &&
		equality.Semantic.DeepEqual(res.GetLabels(), live.GetLabels()) &&
		equality.Semantic.DeepEqual(res.GetOwnerReferences(), live.GetOwnerReferences())
	return !same, false, nil
}

// componentSignature identifies a desired object and the version of its live one: the
// generation of a workload (which moves with its spec, not its status), else the
// resourceVersion; with the live labels and owner references, which move neither.
func componentSignature(want, live *unstructured.Unstructured) string {
	h := sha256.New()
	body, _ := json.Marshal(want.Object)
	h.Write(body)
	version := live.GetResourceVersion()
	if _, workload := componentWorkloadTypes[live.GetKind()]; workload && live.GetGeneration() > 0 {
		version = strconv.FormatInt(live.GetGeneration(), 10)
	}
	meta, _ := json.Marshal([]any{version, live.GetLabels(), live.GetOwnerReferences()})
	h.Write(meta)
	return hex.EncodeToString(h.Sum(nil))
}

// componentPlan is one pass's reading of a Component: desired objects against live ones.
type componentPlan struct {
	want    componentObjects
	objects []componentObjectState
	// stale are owned objects no longer wanted.
	stale []*unstructured.Unstructured
	// workload is the live workload (nil: not created yet).
	workload client.Object
}

// plan reads inputs, builds the desired objects and compares them with the live ones
// (compare false: only read the live ones). A non-nil outcome ends the pass.
func (d *componentDriver) plan(ctx context.Context, c *v1alpha1.Component, compare bool) (*componentPlan, *lifecycle.Outcome, error) {
	in, out, err := d.inputs(ctx, c)
	if out != nil || err != nil {
		return nil, out, err
	}
	want, err := buildComponent(c, in)
	if err != nil {
		return nil, &lifecycle.Outcome{Terminal: err, Reason: "InvalidSpec"}, nil
	}
	p := &componentPlan{want: want}
	desired := []client.Object{want.Workload}
	if want.Service != nil {
		desired = append(desired, want.Service)
	}
	if want.HPA != nil {
		desired = append(desired, want.HPA)
	}
	for _, obj := range desired {
		u, err := componentApplyBody(obj)
		if err != nil {
			return nil, nil, err
		}
		live, err := d.live(ctx, c, u.GroupVersionKind())
		if err != nil {
			return nil, nil, err
		}
		st := componentObjectState{want: u, live: live}
		if live != nil {
			if !componentControls(live, c) {
				return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("%s %s exists and is not controlled by this Component", u.GetKind(), u.GetName()),
					Reason: "NameConflict"}, nil
			}
			if compare {
				key, sig := string(c.UID)+"/"+u.GetKind(), componentSignature(u, live)
				if v, ok := d.verified.Load(key); !ok || v != sig {
					if st.differs, st.immutable, err = d.compare(ctx, u, live); err != nil {
						return nil, nil, err
					}
					if !st.differs {
						d.verified.Store(key, sig)
					}
				}
			}
			if obj == want.Workload {
				typed := componentWorkloadTypes[u.GetKind()]()
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, typed); err != nil {
					return nil, nil, fmt.Errorf("decode %s %s: %w", u.GetKind(), c.Name, err)
				}
				p.workload = typed
			}
		}
		p.objects = append(p.objects, st)
	}
	// Owned objects of kinds no longer wanted.
	var others []schema.GroupVersionKind
	if prev := c.Status.Workload; prev != nil && prev.Kind != want.Workload.GetObjectKind().GroupVersionKind().Kind {
		if gvk, ok := componentWorkloadGVKs[prev.Kind]; ok {
			others = append(others, gvk)
		}
	}
	if want.Service == nil {
		others = append(others, componentServiceGVK)
	}
	if want.HPA == nil {
		others = append(others, componentHPAGVK)
	}
	for _, gvk := range others {
		live, err := d.live(ctx, c, gvk)
		if err != nil {
			return nil, nil, err
		}
		if live != nil && componentControls(live, c) {
			p.stale = append(p.stale, live)
		}
	}
	return p, nil, nil
}

// setStatus shows the plan's live workload in c's status.
func setComponentStatus(c *v1alpha1.Component, p *componentPlan, release string) componentWorkloadState {
	kind := p.want.Workload.GetObjectKind().GroupVersionKind().Kind
	c.Status.Workload = &v1alpha1.WorkloadRef{Kind: kind, Name: c.Name}
	c.Status.Service = ""
	if p.want.Service != nil {
		c.Status.Service = p.want.Service.Name
	}
	c.Status.Release = release
	var ws componentWorkloadState
	if p.workload != nil {
		ws = readComponentWorkload(p.workload)
	}
	c.Status.Replicas, c.Status.ReadyReplicas, c.Status.UpdatedReplicas, c.Status.Image = ws.Replicas, ws.Ready, ws.Updated, ws.Image
	return ws
}

func (d *componentDriver) Observe(ctx context.Context, c *v1alpha1.Component) (lifecycle.Outcome, error) {
	p, out, err := d.plan(ctx, c, true)
	if out != nil || err != nil {
		return deref(out), err
	}
	rel, err := d.release(ctx, c)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	ws := setComponentStatus(c, p, rel)
	upToDate := len(p.stale) == 0
	for _, o := range p.objects {
		if o.live == nil || o.differs {
			upToDate = false
		}
	}
	if p.workload == nil || !upToDate {
		return lifecycle.Outcome{Exists: p.workload != nil}, nil
	}
	return d.readiness(ctx, c, ws)
}

// readiness is the outcome of an up-to-date Component: Active when its workload is done,
// Failed for a failed Job, else Reconciling with what blocks its pods.
func (d *componentDriver) readiness(ctx context.Context, c *v1alpha1.Component, ws componentWorkloadState) (lifecycle.Outcome, error) {
	out := lifecycle.Outcome{Exists: true, UpToDate: true}
	switch {
	case ws.Failed:
		out.Phase, out.Reason, out.Message = lifecycle.PhaseFailed, "JobFailed", ws.Message
		return out, nil
	case ws.Done:
		out.Reason = "Ready"
		out.Message = fmt.Sprintf("%s %s: %d/%d ready", c.Status.Workload.Kind, c.Name, ws.Ready, ws.Replicas)
		return out, nil
	}
	var pods corev1.PodList
	if err := d.reads.cache().List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(componentSelector(c))); err != nil {
		return out, fmt.Errorf("list pods: %w", err)
	}
	out.Phase, out.RequeueAfter = lifecycle.PhaseReconciling, componentNotReadyRequeue
	out.Reason, out.Message = componentPodBlocker(pods.Items)
	if out.Reason == "" {
		out.Reason, out.Message = "RollingOut", fmt.Sprintf("%s %s: %s", c.Status.Workload.Kind, c.Name, ws.Message)
	}
	return out, nil
}

func (d *componentDriver) Provision(ctx context.Context, c *v1alpha1.Component) (lifecycle.Outcome, error) {
	return d.ensure(ctx, c, "Provisioned")
}

func (d *componentDriver) Update(ctx context.Context, c *v1alpha1.Component) (lifecycle.Outcome, error) {
	return d.ensure(ctx, c, "Updated")
}

// ensure applies every desired object and deletes the stale ones.
func (d *componentDriver) ensure(ctx context.Context, c *v1alpha1.Component, reason string) (lifecycle.Outcome, error) {
	p, out, err := d.plan(ctx, c, false)
	if out != nil || err != nil {
		return deref(out), err
	}
	for _, s := range p.stale {
		if err := d.delete(ctx, s); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	var written []string
	for _, o := range p.objects {
		if err := d.prepare(ctx, o); err != nil {
			return lifecycle.Outcome{}, err
		}
		res := o.want.DeepCopy()
		err := d.o.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(res), client.FieldOwner(componentFieldManager), client.ForceOwnership)
		if err != nil && apierrors.IsInvalid(err) && o.want.GetKind() == "Job" && o.live != nil {
			// A Job's template is immutable: a changed Component runs a new Job.
			if err := d.delete(ctx, o.live); err != nil {
				return lifecycle.Outcome{}, err
			}
			return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "ReplacingJob",
				Message: "the Job's template changed: the old Job is deleted, a new one follows", RequeueAfter: 2 * time.Second}, nil
		}
		if err != nil {
			return lifecycle.Outcome{}, fmt.Errorf("apply %s %s: %w", o.want.GetKind(), o.want.GetName(), err)
		}
		// The answer is the object as applied: until it moves, the passes to come need
		// no dry run to know it is what is wanted, and its own event no pass at all (this
		// one shows it: the status below is read from the answer).
		d.verified.Store(string(c.UID)+"/"+o.want.GetKind(), componentSignature(o.want, res))
		d.reads.created(res)
		liveVersion := ""
		if o.live != nil {
			liveVersion = o.live.GetResourceVersion()
		}
		d.reads.applied(liveVersion, res)
		if o.want.GetKind() == p.want.Workload.GetObjectKind().GroupVersionKind().Kind {
			typed := componentWorkloadTypes[o.want.GetKind()]()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Object, typed); err == nil {
				p.workload = typed
			}
		}
		written = append(written, o.want.GetKind())
	}
	rel, err := d.release(ctx, c)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	setComponentStatus(c, p, rel)
	msg := fmt.Sprintf("applied %s %s", strings.Join(written, ", "), c.Name)
	if p.want.Workload.GetObjectKind().GroupVersionKind().Kind == v1alpha1.WorkloadCronJob {
		return lifecycle.Outcome{Reason: reason, Message: msg}, nil
	}
	// The workload's status changes (Owns) bring the next pass, which finds it ready.
	return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: reason, Message: msg, RequeueAfter: componentNotReadyRequeue}, nil
}

// prepare makes an apply possible where the merge of the apply alone would be invalid:
// a Deployment going from RollingUpdate to Recreate must lose its rollingUpdate
// parameters (defaulted by the server, so owned by no manager the apply could drop).
func (d *componentDriver) prepare(ctx context.Context, o componentObjectState) error {
	if !needsRecreateSwitch(o.want, o.live) {
		return nil
	}
	patch := []byte(`{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}`)
	if err := d.o.Client.Patch(ctx, o.live.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("switch Deployment %s to Recreate: %w", o.live.GetName(), err)
	}
	return nil
}

// needsRecreateSwitch: want is a Recreate Deployment and live still has the parameters of
// a rolling update.
func needsRecreateSwitch(want, live *unstructured.Unstructured) bool {
	if live == nil || want.GetKind() != "Deployment" {
		return false
	}
	typ, _, _ := unstructured.NestedString(want.Object, "spec", "strategy", "type")
	_, hasRolling, _ := unstructured.NestedMap(live.Object, "spec", "strategy", "rollingUpdate")
	return typ == string(appsv1.RecreateDeploymentStrategyType) && hasRolling
}

// delete deletes obj (foreground: a workload goes once its pods have).
func (d *componentDriver) delete(ctx context.Context, obj *unstructured.Unstructured) error {
	err := d.o.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground),
		client.Preconditions{UID: ptr.To(obj.GetUID())})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// Deprovision deletes the HPA, the Service and the workload, and waits until the workload
// (deleted in the foreground, so after its pods) is gone.
func (d *componentDriver) Deprovision(ctx context.Context, c *v1alpha1.Component) (lifecycle.Outcome, error) {
	kinds := []schema.GroupVersionKind{componentHPAGVK, componentServiceGVK}
	for _, k := range []string{v1alpha1.WorkloadDeployment, v1alpha1.WorkloadStatefulSet, v1alpha1.WorkloadJob, v1alpha1.WorkloadCronJob} {
		if k == c.Spec.Workload || (c.Status.Workload != nil && c.Status.Workload.Kind == k) ||
			(c.Spec.Workload == "" && (k == v1alpha1.WorkloadDeployment || k == v1alpha1.WorkloadStatefulSet)) {
			kinds = append(kinds, componentWorkloadGVKs[k])
		}
	}
	var waiting []string
	for _, gvk := range kinds {
		live, err := d.live(ctx, c, gvk)
		if err != nil {
			return lifecycle.Outcome{}, err
		}
		if live == nil || !componentControls(live, c) {
			continue
		}
		if live.GetDeletionTimestamp() == nil {
			if err := d.delete(ctx, live); err != nil {
				return lifecycle.Outcome{}, err
			}
		}
		if gvk != componentHPAGVK && gvk != componentServiceGVK {
			waiting = append(waiting, gvk.Kind+" "+c.Name)
		}
	}
	for kind := range componentWorkloadTypes {
		d.verified.Delete(string(c.UID) + "/" + kind)
	}
	d.verified.Delete(string(c.UID) + "/Service")
	d.verified.Delete(string(c.UID) + "/HorizontalPodAutoscaler")
	if len(waiting) > 0 {
		return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "WaitingForPods",
			Message: "waiting for the pods of " + strings.Join(waiting, ", ") + " to stop", RequeueAfter: 2 * time.Second}, nil
	}
	return lifecycle.Outcome{Reason: "Deleted", Message: "workload, Service and HPA deleted"}, nil
}

// mapApplication: an Application's change concerns its member Components (named, or
// labelled by the Application driver).
func (d *componentDriver) mapApplication(ctx context.Context, obj client.Object) []types.NamespacedName {
	app, ok := obj.(*v1alpha1.Application)
	if !ok {
		return nil
	}
	d.reads.record(app)
	// What a Component takes from its Application is in the spec: status writes (its table
	// of the members, rewritten as they progress) do not concern them. A deletion's last
	// event carries the generation already mapped; the members' own deletions follow.
	mark := fmt.Sprintf("%d/%t", app.Generation, app.DeletionTimestamp != nil)
	if prev, loaded := d.apps.Swap(app.UID, mark); loaded && prev == mark {
		return nil
	}
	seen := map[string]bool{}
	for _, n := range app.Spec.Components {
		seen[n] = true
	}
	var l v1alpha1.ComponentList
	if err := d.reads.cache().List(ctx, &l, client.InNamespace(app.Namespace), client.MatchingLabels{componentLabelApplication: app.Name}); err == nil {
		for _, c := range l.Items {
			seen[c.Name] = true
		}
	}
	out := make([]types.NamespacedName, 0, len(seen))
	for n := range seen {
		out = append(out, types.NamespacedName{Namespace: app.Namespace, Name: n})
	}
	return out
}

// mapRelease: a Release concerns its Component (status.release).
func (d *componentDriver) mapRelease(_ context.Context, obj client.Object) []types.NamespacedName {
	r, ok := obj.(*v1alpha1.Release)
	if !ok || r.Spec.Component == "" {
		return nil
	}
	d.reads.recordRelease(r)
	return []types.NamespacedName{{Namespace: r.Namespace, Name: r.Spec.Component}}
}

// mapVolume: a Volume concerns the Components that use it (its claim name).
func (d *componentDriver) mapVolume(ctx context.Context, obj client.Object) []types.NamespacedName {
	d.reads.record(obj)
	var l v1alpha1.ComponentList
	if err := d.reads.cache().List(ctx, &l, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []types.NamespacedName
	for _, c := range l.Items {
		for _, u := range c.Spec.Uses {
			if u.Kind == "Volume" && u.Name == obj.GetName() {
				out = append(out, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
				break
			}
		}
	}
	return out
}
