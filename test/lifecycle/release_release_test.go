package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func component(name, image string, replicas int) string {
	return fmt.Sprintf(`apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: %s}
spec:
  image: %s
  replicas: %d
  exposes: [{name: http, port: 8080}]
`, name, image, replicas)
}

// waitComponentActive waits until the Component is Active with all replicas ready.
func waitComponentActive(t *testing.T, name string) {
	t.Helper()
	releaseEventually(t, 90*time.Second, func() error {
		var c v1alpha1.Component
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return err
		}
		if c.Status.Phase != lifecycle.PhaseActive {
			return fmt.Errorf("component %s phase %q conditions %+v", name, c.Status.Phase, c.Status.Conditions)
		}
		return nil
	})
}

func release(t *testing.T, name string) *v1alpha1.Release {
	t.Helper()
	return get(t, &v1alpha1.Release{}, name)
}

func notFound(t *testing.T, obj client.Object, name string) error {
	t.Helper()
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%T %s still exists", obj, name)
}

// eventReasons lists the reasons of the Events about a Release.
func eventReasons(t *testing.T, name string) []string {
	t.Helper()
	var evs corev1.EventList
	if err := admin.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Release" && e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func hasAll(have []string, want ...string) error {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return fmt.Errorf("no %s among %v", w, have)
		}
	}
	return nil
}

// TestCanaryPromote: 20 % → pause until promoted → kubectl kube promote → the Component runs
// the new image and the canary objects are gone.
func TestCanaryPromote(t *testing.T) {
	releaseSuite.Need(t)
	apply(t, component("web", "example.com/web:1", 5))
	waitComponentActive(t, "web")
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: web}
spec:
  component: web
  image: example.com/web:2
  strategy:
    type: Canary
    steps: [{setWeight: 20}, {pause: {}}]
`)
	releaseEventually(t, 90*time.Second, func() error {
		r := release(t, "web")
		if r.Status.ReleasePhase != v1alpha1.ReleasePaused || r.Status.CurrentStep == nil || *r.Status.CurrentStep != 1 {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	r := release(t, "web")
	if r.Status.CanaryWeight == nil || *r.Status.CanaryWeight != 20 {
		t.Fatalf("canaryWeight %v, want 20", r.Status.CanaryWeight)
	}
	if r.Status.CanaryRevision == "" || r.Status.StableRevision == "" || r.Status.CanaryRevision == r.Status.StableRevision {
		t.Fatalf("revisions stable %q canary %q", r.Status.StableRevision, r.Status.CanaryRevision)
	}
	if len(r.Status.History) != 1 || r.Status.History[0].Image != "example.com/web:2" || r.Status.History[0].Outcome != "" {
		t.Fatalf("history %+v", r.Status.History)
	}
	// 20 % of 5 replicas: one canary pod beside the five stable ones (no Route fronts web).
	canary := get(t, &appsv1.Deployment{}, "web-canary")
	if *canary.Spec.Replicas != 1 || canary.Status.ReadyReplicas != 1 {
		t.Fatalf("canary replicas %d ready %d, want 1/1", *canary.Spec.Replicas, canary.Status.ReadyReplicas)
	}
	if img := canary.Spec.Template.Spec.Containers[0].Image; img != "example.com/web:2" {
		t.Fatalf("canary image %s", img)
	}
	if canary.Spec.Template.Labels[v1alpha1.LabelTrack] != v1alpha1.TrackCanary || canary.Labels["kubeos.dev/release"] != "web" {
		t.Fatalf("canary labels %v template %v", canary.Labels, canary.Spec.Template.Labels)
	}
	if ref := canary.OwnerReferences; len(ref) != 1 || ref[0].Kind != "Release" || ref[0].UID != r.UID {
		t.Fatalf("canary owner %+v", ref)
	}
	stable := get(t, &appsv1.Deployment{}, "web")
	if img := stable.Spec.Template.Spec.Containers[0].Image; img != "example.com/web:1" || *stable.Spec.Replicas != 5 {
		t.Fatalf("stable %s × %d, want web:1 × 5", img, *stable.Spec.Replicas)
	}
	for name, track := range map[string]string{"web-stable": v1alpha1.TrackStable, "web-canary": v1alpha1.TrackCanary} {
		s := get(t, &corev1.Service{}, name)
		if s.Spec.Selector[v1alpha1.LabelTrack] != track || s.Spec.Selector[v1alpha1.LabelComponent] != "web" || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8080 {
			t.Fatalf("service %s: selector %v ports %+v", name, s.Spec.Selector, s.Spec.Ports)
		}
	}

	// Promote through kubectl's plugin lookup, as the tenant's admin.
	out, errOut, err := releaseKubectl(t, "", "kube", "promote", "release/web")
	if err != nil || !strings.Contains(out, "promoted") {
		t.Fatalf("kubectl kube promote: %v\n%s%s", err, out, errOut)
	}
	releaseEventually(t, 90*time.Second, func() error {
		r := release(t, "web")
		if r.Status.ReleasePhase != v1alpha1.ReleaseSucceeded {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	r = release(t, "web")
	if r.Status.CanaryWeight != nil || r.Status.StableRevision != r.Status.CanaryRevision || r.Status.History[0].Outcome != v1alpha1.ReleaseSucceeded {
		t.Fatalf("status after promotion %+v", r.Status)
	}
	if _, ok := r.Annotations[v1alpha1.PromoteAnnotation]; ok {
		t.Fatalf("the promote annotation stayed: %v", r.Annotations)
	}
	if c := get(t, &v1alpha1.Component{}, "web"); c.Spec.Image != "example.com/web:2" {
		t.Fatalf("component image %s", c.Spec.Image)
	}
	releaseEventually(t, 30*time.Second, func() error {
		d := get(t, &appsv1.Deployment{}, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "example.com/web:2" || d.Status.UpdatedReplicas != 5 {
			return fmt.Errorf("stable deployment %s updated %d", img, d.Status.UpdatedReplicas)
		}
		return errors.Join(notFound(t, &appsv1.Deployment{}, "web-canary"), notFound(t, &corev1.Service{}, "web-canary"), notFound(t, &corev1.Service{}, "web-stable"))
	})
	releaseEventually(t, 30*time.Second, func() error {
		return hasAll(eventReasons(t, "web"), "RevisionStarted", "Paused", "Promoted", "Succeeded")
	})
}

// TestCanaryBrokenRollsBack: the revision's canary pods crash-loop; past the progress
// deadline the Release rolls back by itself with the pods' reason.
func TestCanaryBrokenRollsBack(t *testing.T) {
	releaseSuite.Need(t)
	apply(t, component(brokenComponent, "example.com/broken:1", 2))
	waitComponentActive(t, brokenComponent)
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: broken}
spec:
  component: broken
  image: example.com/broken:2
  progressDeadlineSeconds: 10
  strategy:
    type: Canary
    steps: [{setWeight: 50}, {pause: {}}]
`)
	releaseEventually(t, 120*time.Second, func() error {
		r := release(t, "broken")
		if r.Status.ReleasePhase != v1alpha1.ReleaseRolledBack {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	r := release(t, "broken")
	h := r.Status.History
	if len(h) != 1 || h[0].Outcome != v1alpha1.ReleaseRolledBack || !strings.Contains(h[0].Message, "CrashLoopBackOff") || h[0].Ended == nil {
		t.Fatalf("history %+v", h)
	}
	if r.Status.CanaryWeight != nil || r.Status.CurrentStep != nil {
		t.Fatalf("status %+v", r.Status)
	}
	if c := get(t, &v1alpha1.Component{}, brokenComponent); c.Spec.Image != "example.com/broken:1" {
		t.Fatalf("component image %s after a rollback", c.Spec.Image)
	}
	releaseEventually(t, 30*time.Second, func() error {
		return errors.Join(notFound(t, &appsv1.Deployment{}, "broken-canary"), notFound(t, &corev1.Service{}, "broken-canary"),
			hasAll(eventReasons(t, "broken"), "RevisionStarted", "RolledBack"))
	})
	// The rolled-back revision is not retried: the phase stays and no new canary appears.
	if err := notFound(t, &appsv1.Deployment{}, "broken-canary"); err != nil {
		t.Fatal(err)
	}
	if r := release(t, "broken"); r.Status.ReleasePhase != v1alpha1.ReleaseRolledBack || len(r.Status.History) != 1 {
		t.Fatalf("after rollback %+v", r.Status)
	}

	// One Release per Component.
	_, errOut, err := releaseKubectl(t, `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: broken-again}
spec: {component: broken, image: example.com/broken:3}
`, "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, "one Release per Component") {
		t.Fatalf("a second Release of broken: %v %s", err, errOut)
	}
}

// TestRecreate ships a revision with strategy Recreate: the Component's Deployment takes it.
func TestRecreate(t *testing.T) {
	releaseSuite.Need(t)
	apply(t, component("api", "example.com/api:1", 2))
	waitComponentActive(t, "api")
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: api}
spec:
  component: api
  image: example.com/api:2
  env: [{name: MODE, value: fast}]
  strategy: {type: Recreate}
`)
	releaseEventually(t, 90*time.Second, func() error {
		r := release(t, "api")
		if r.Status.ReleasePhase != v1alpha1.ReleaseSucceeded || len(r.Status.History) != 1 {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	c := get(t, &v1alpha1.Component{}, "api")
	if c.Spec.Image != "example.com/api:2" || len(c.Spec.Env) != 1 || c.Spec.Env[0].Value != "fast" || c.Annotations[v1alpha1.AnnotationRolloutStrategy] != "Recreate" {
		t.Fatalf("component %s env %v annotations %v", c.Spec.Image, c.Spec.Env, c.Annotations)
	}
	d := get(t, &appsv1.Deployment{}, "api")
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Template.Spec.Containers[0].Image != "example.com/api:2" {
		t.Fatalf("deployment strategy %s image %s", d.Spec.Strategy.Type, d.Spec.Template.Spec.Containers[0].Image)
	}
}

// TestReleaseValidation: 422s of the Release validator.
func TestReleaseValidation(t *testing.T) {
	releaseSuite.Need(t)
	for name, spec := range map[string]string{
		"no steps":   `{component: x1, strategy: {type: Canary}}`,
		"both":       `{component: x2, strategy: {type: Canary, steps: [{setWeight: 10, pause: {}}]}}`,
		"neither":    `{component: x3, strategy: {type: Canary, steps: [{}]}}`,
		"decreasing": `{component: x4, strategy: {type: Canary, steps: [{setWeight: 50}, {setWeight: 20}]}}`,
		"over 100":   `{component: x5, strategy: {type: Canary, steps: [{setWeight: 120}]}}`,
	} {
		_, errOut, err := releaseKubectl(t, "apiVersion: kubeos.dev/v1alpha1\nkind: Release\nmetadata: {name: bad}\nspec: "+spec+"\n", "apply", "-f", "-")
		if err == nil || !strings.Contains(errOut, `The Release "bad" is invalid`) {
			t.Errorf("%s: accepted or not a 422: %v %s", name, err, errOut)
		}
	}
}

// TestCanaryAnalysis: the analysis window passes while its Alert is quiet; once a named
// Alert fires, the Release rolls back by itself.
func TestCanaryAnalysis(t *testing.T) {
	releaseSuite.Need(t)
	apply(t, component("search", "example.com/search:1", 2))
	waitComponentActive(t, "search")
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Alert
metadata: {name: search-quiet}
spec: {expr: 'vector(0) > 1'}
---
apiVersion: kubeos.dev/v1alpha1
kind: Alert
metadata: {name: search-errors}
spec: {expr: 'vector(1)'}
`)
	releaseEventually(t, 90*time.Second, func() error {
		if a := get(t, &v1alpha1.Alert{}, "search-errors"); a.Status.State != v1alpha1.AlertFiring {
			return fmt.Errorf("alert search-errors state %q", a.Status.State)
		}
		return nil
	})
	release := `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: search}
spec:
  component: search
  image: example.com/search:2
  strategy:
    type: Canary
    steps: [{setWeight: 50}, {pause: {}}]
    analysis: {alerts: [%s], duration: 3s}
`
	apply(t, fmt.Sprintf(release, "search-quiet"))
	releaseEventually(t, 90*time.Second, func() error {
		r := get(t, &v1alpha1.Release{}, "search")
		if r.Status.ReleasePhase != v1alpha1.ReleasePaused {
			return fmt.Errorf("release %+v", r.Status)
		}
		return hasAll(eventReasons(t, "search"), "Analysis", "Paused")
	})
	apply(t, fmt.Sprintf(release, "search-quiet, search-errors"))
	releaseEventually(t, 60*time.Second, func() error {
		r := get(t, &v1alpha1.Release{}, "search")
		if r.Status.ReleasePhase != v1alpha1.ReleaseRolledBack || !strings.Contains(r.Status.History[0].Message, "Alert search-errors is firing") {
			return fmt.Errorf("release %+v", r.Status)
		}
		return notFound(t, &appsv1.Deployment{}, "search-canary")
	})
	if c := get(t, &v1alpha1.Component{}, "search"); c.Spec.Image != "example.com/search:1" {
		t.Fatalf("component image %s", c.Spec.Image)
	}
}

// TestRoutedCanaryAbort: with a Route fronting the Component the canary keeps a replica even
// at weight 0 (the gateway does the weighting); kubectl kube abort ends the rollout.
func TestRoutedCanaryAbort(t *testing.T) {
	releaseSuite.Need(t)
	apply(t, component("pay", "example.com/pay:1", 4)+`---
apiVersion: kubeos.dev/v1alpha1
kind: Route
metadata: {name: pay}
spec:
  hostnames: [pay.localtest]
  rules: [{backends: [{component: pay, port: 8080}]}]
`)
	waitComponentActive(t, "pay")
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: pay}
spec:
  component: pay
  image: example.com/pay:2
  strategy:
    type: Canary
    steps: [{setWeight: 0}, {pause: {}}]
`)
	releaseEventually(t, 90*time.Second, func() error {
		r := get(t, &v1alpha1.Release{}, "pay")
		if r.Status.ReleasePhase != v1alpha1.ReleasePaused || r.Status.CanaryWeight == nil || *r.Status.CanaryWeight != 0 {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	if d := get(t, &appsv1.Deployment{}, "pay-canary"); *d.Spec.Replicas != 1 {
		t.Fatalf("routed canary at weight 0 has %d replicas, want 1", *d.Spec.Replicas)
	}
	out, errOut, err := releaseKubectl(t, "", "kube", "abort", "release/pay")
	if err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("kubectl kube abort: %v\n%s%s", err, out, errOut)
	}
	releaseEventually(t, 60*time.Second, func() error {
		r := get(t, &v1alpha1.Release{}, "pay")
		if r.Status.ReleasePhase != v1alpha1.ReleaseAborted || r.Status.History[0].Outcome != v1alpha1.ReleaseAborted || r.Status.CanaryWeight != nil {
			return fmt.Errorf("release %+v", r.Status)
		}
		if _, ok := r.Annotations[v1alpha1.AbortAnnotation]; ok {
			return fmt.Errorf("abort annotation still set")
		}
		return errors.Join(notFound(t, &appsv1.Deployment{}, "pay-canary"), notFound(t, &corev1.Service{}, "pay-canary"))
	})
	if c := get(t, &v1alpha1.Component{}, "pay"); c.Spec.Image != "example.com/pay:1" {
		t.Fatalf("component image %s after abort", c.Spec.Image)
	}
	// kube promote refuses what is not a Release.
	if out, errOut, err := releaseKubectl(t, "", "kube", "promote", "component/pay"); err == nil {
		t.Fatalf("promote component/pay succeeded: %s%s", out, errOut)
	}
}
