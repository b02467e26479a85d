package platform

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// The canary objects of a Release: Deployment <component>-canary (the Component's pod
// template with the revision's image and env, track canary) and Services
// <component>-stable and <component>-canary (the ports of Service <component>, one track
// each), all controlled by the Release.

// Labels of the contract between the application kinds.
const (
	labelReleaseKey     = "kubeos.dev/release"
	labelApplicationKey = "kubeos.dev/application"
	labelManagedBy      = "app.kubernetes.io/managed-by"
	labelAppName        = "app.kubernetes.io/name"
	labelPartOf         = "app.kubernetes.io/part-of"
)

// mainImage is the image of the container "main" (else the first).
func mainImage(t *corev1.PodTemplateSpec) string {
	if i := mainIndex(t.Spec.Containers); i >= 0 {
		return t.Spec.Containers[i].Image
	}
	return ""
}

func mainIndex(cs []corev1.Container) int {
	for i := range cs {
		if cs[i].Name == "main" {
			return i
		}
	}
	if len(cs) > 0 {
		return 0
	}
	return -1
}

// deploymentDone: the controller saw the spec and every replica is updated and available.
func deploymentDone(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// deploymentStuck: its progress deadline passed.
func deploymentStuck(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// releaseLabels are the labels of the objects a Release creates.
func releaseLabels(rel string, comp *v1alpha1.Component) map[string]string {
	l := map[string]string{labelReleaseKey: rel, labelManagedBy: "kube", labelAppName: comp.Name}
	if app := comp.Labels[labelPartOf]; app != "" {
		l[labelPartOf] = app
	}
	return l
}

// canaryDeployment is the canary Deployment for the target revision (rel nil: no owner,
// for comparisons).
func canaryDeployment(rel *v1alpha1.Release, comp *v1alpha1.Component, stable *appsv1.Deployment, target revisionSpec, replicas int32, deadline interface{ Seconds() float64 }) *appsv1.Deployment {
	tpl := stable.Spec.Template.DeepCopy()
	if tpl.Labels == nil {
		tpl.Labels = map[string]string{}
	}
	tpl.Labels[v1alpha1.LabelComponent] = comp.Name
	tpl.Labels[v1alpha1.LabelTrack] = "canary"
	if i := mainIndex(tpl.Spec.Containers); i >= 0 {
		c := &tpl.Spec.Containers[i]
		c.Image = target.Image
		// The revision's env goes over the container's (which holds the injected connections),
		// its placeholders resolved as the Component resolves spec.env (look refuses a
		// revision whose placeholders do not resolve).
		over := envDiff(comp.Spec.Env, target.Env)
		if resolved, err := resolveRevisionEnv(over, c.Env); err == nil {
			over = resolved
		}
		c.Env = mergeRevision(revisionSpec{Env: c.Env}, "", over).Env
	}
	pds := int32(deadline.Seconds())
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: comp.Namespace, Name: canaryName(comp.Name), Labels: map[string]string{}},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptrTo(replicas),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelComponent: comp.Name, v1alpha1.LabelTrack: "canary"}},
			Template:                *tpl,
			ProgressDeadlineSeconds: &pds,
		},
	}
	if rel != nil {
		for k, v := range releaseLabels(rel.Name, comp) {
			d.Labels[k] = v
		}
		d.OwnerReferences = ownerRef(rel, "Release")
	}
	return d
}

// envDiff is the part of target's env that differs from base (what the revision changes).
func envDiff(base, target []corev1.EnvVar) []corev1.EnvVar {
	had := map[string]corev1.EnvVar{}
	for _, e := range base {
		had[e.Name] = e
	}
	var out []corev1.EnvVar
	for _, e := range target {
		if b, ok := had[e.Name]; ok && equality.Semantic.DeepEqual(b, e) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// canaryUpToDate compares what the Release sets of its canary Deployment.
func canaryUpToDate(cur, want *appsv1.Deployment) bool {
	return equality.Semantic.DeepEqual(cur.Spec.Replicas, want.Spec.Replicas) &&
		equality.Semantic.DeepEqual(cur.Spec.Template.Labels, want.Spec.Template.Labels) &&
		equality.Semantic.DeepEqual(cur.Spec.Template.Spec.Containers, want.Spec.Template.Spec.Containers) &&
		equality.Semantic.DeepEqual(cur.Spec.ProgressDeadlineSeconds, want.Spec.ProgressDeadlineSeconds)
}

// ensureCanary creates or updates the canary Deployment and the two Services.
func (d *releaseDriver) ensureCanary(ctx context.Context, rel *v1alpha1.Release, l *releaseLook) error {
	c := d.o.Client
	want := canaryDeployment(rel, l.comp, l.stable, l.target, l.plan.CanaryReplicas, l.obs.Deadline)
	switch {
	case l.canary == nil:
		if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create canary deployment: %w", err)
		}
	case !controlledBy(l.canary, rel):
		return fmt.Errorf("deployment %s exists and is not controlled by Release %s", l.canary.Name, rel.Name)
	case !canaryUpToDate(l.canary, want):
		cur := l.canary.DeepCopy()
		cur.Spec.Replicas, cur.Spec.Template, cur.Spec.ProgressDeadlineSeconds = want.Spec.Replicas, want.Spec.Template, want.Spec.ProgressDeadlineSeconds
		if err := c.Update(ctx, cur); err != nil {
			return fmt.Errorf("update canary deployment: %w", err)
		}
	}
	var front corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: l.comp.Name}, &front); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the Component exposes nothing: no Services to split
		}
		return fmt.Errorf("read service %s: %w", l.comp.Name, err)
	}
	for name, track := range map[string]string{stableName(l.comp.Name): "stable", canaryName(l.comp.Name): "canary"} {
		if err := ensureTrackService(ctx, c, rel, l.comp, &front, name, track); err != nil {
			return err
		}
	}
	return nil
}

func ensureTrackService(ctx context.Context, c client.Client, rel *v1alpha1.Release, comp *v1alpha1.Component, front *corev1.Service, name, track string) error {
	ports := make([]corev1.ServicePort, len(front.Spec.Ports))
	for i, p := range front.Spec.Ports {
		ports[i] = corev1.ServicePort{Name: p.Name, Port: p.Port, TargetPort: p.TargetPort, Protocol: p.Protocol}
	}
	selector := map[string]string{v1alpha1.LabelComponent: comp.Name, v1alpha1.LabelTrack: track}
	var cur corev1.Service
	err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: name}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: rel.Namespace, Name: name, Labels: releaseLabels(rel.Name, comp), OwnerReferences: ownerRef(rel, "Release")},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: selector, Ports: ports},
		}
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read service %s: %w", name, err)
	case !controlledBy(&cur, rel):
		return fmt.Errorf("service %s exists and is not controlled by Release %s", name, rel.Name)
	}
	same := equality.Semantic.DeepEqual(cur.Spec.Selector, selector) && len(cur.Spec.Ports) == len(ports)
	for i := 0; same && i < len(ports); i++ {
		same = cur.Spec.Ports[i].Port == ports[i].Port && cur.Spec.Ports[i].Name == ports[i].Name && cur.Spec.Ports[i].TargetPort == ports[i].TargetPort
	}
	if same {
		return nil
	}
	cur.Spec.Selector, cur.Spec.Ports = selector, ports
	if err := c.Update(ctx, &cur); err != nil {
		return fmt.Errorf("update service %s: %w", name, err)
	}
	return nil
}

// deleteCanary deletes the canary Deployment and Services this Release controls.
func (d *releaseDriver) deleteCanary(ctx context.Context, rel *v1alpha1.Release) error {
	c := d.o.Client
	name := rel.Spec.Component
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	objs := []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.Service{}}
	for i, n := range []string{canaryName(name), canaryName(name), stableName(name)} {
		obj := objs[i]
		if err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: n}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("read %s: %w", n, err)
		}
		if !controlledBy(obj, rel) {
			continue
		}
		if err := c.Delete(ctx, obj, bg); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", n, err)
		}
	}
	return nil
}

// releaseIndex maps Components and Alerts to the Releases that name them, for the
// watches (no API call per event). Filled as Releases are reconciled.
type releaseIndex struct {
	mu      sync.Mutex
	entries map[types.NamespacedName][]string // release → "component/<n>", "alert/<n>"
	keys    map[string]map[types.NamespacedName]struct{}
}

func newReleaseIndex() *releaseIndex {
	return &releaseIndex{entries: map[types.NamespacedName][]string{}, keys: map[string]map[types.NamespacedName]struct{}{}}
}

func (x *releaseIndex) set(rel *v1alpha1.Release) {
	id := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	keys := []string{rel.Namespace + "/component/" + rel.Spec.Component}
	if a := rel.Spec.Strategy.Analysis; a != nil {
		for _, n := range a.Alerts {
			keys = append(keys, rel.Namespace+"/alert/"+n)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(id)
	x.entries[id] = keys
	for _, k := range keys {
		if x.keys[k] == nil {
			x.keys[k] = map[types.NamespacedName]struct{}{}
		}
		x.keys[k][id] = struct{}{}
	}
}

func (x *releaseIndex) remove(rel *v1alpha1.Release) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name})
}

func (x *releaseIndex) removeLocked(id types.NamespacedName) {
	for _, k := range x.entries[id] {
		delete(x.keys[k], id)
		if len(x.keys[k]) == 0 {
			delete(x.keys, k)
		}
	}
	delete(x.entries, id)
}

func (x *releaseIndex) lookup(key string) []types.NamespacedName {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(x.keys[key]))
	for id := range x.keys[key] {
		out = append(out, id)
	}
	return out
}

func (x *releaseIndex) byComponent(ns, name string) []types.NamespacedName {
	return x.lookup(ns + "/component/" + name)
}

func (x *releaseIndex) byAlert(ns, name string) []types.NamespacedName {
	return x.lookup(ns + "/alert/" + name)
}
