package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// TestComponentCanaryThroughRoute: a Component of two busybox httpd pods answering their
// VERSION, a Route in front (Active, its hostname Accepted and ResolvedRefs), then a
// Canary Release to VERSION=v2 at 20 %: the gateway's traffic splits between the stable
// and canary pods; promoted, every answer is v2.
func TestComponentCanaryThroughRoute(t *testing.T) {
	ctx := ctxT(t)
	ns := namespace(t, "gw-canary", "")
	comp := &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.ComponentSpec{
		Image:    busyboxImage,
		Command:  []string{"sh", "-c", "mkdir -p /www && echo $VERSION > /www/index.html && exec httpd -f -p 8080 -h /www"},
		Env:      []corev1.EnvVar{{Name: "VERSION", Value: "v1"}},
		Replicas: ptr.To[int32](2),
		Exposes:  []v1alpha1.ComponentPort{{Name: "http", Port: 8080}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1},
	}}
	if _, err := xc.KubeosV1alpha1().Components(ns).Create(ctx, comp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"canary.gw.test"},
			Rules: []v1alpha1.RouteRule{{Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 8080}}}}}})
	servertest.Eventually(t, 3*time.Minute, 500*time.Millisecond, func() error {
		r, err := xc.KubeosV1alpha1().Routes(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r.Status.Phase != lifecycle.PhaseActive || len(r.Status.Hostnames) != 1 {
			return fmt.Errorf("route phase %s conditions %+v hostnames %+v", r.Status.Phase, r.Status.Conditions, r.Status.Hostnames)
		}
		h := r.Status.Hostnames[0]
		for _, c := range []string{"Accepted", "ResolvedRefs"} {
			if !meta.IsStatusConditionTrue(h.Conditions, c) {
				return fmt.Errorf("hostname %s: %s not True: %+v", h.Hostname, c, h.Conditions)
			}
		}
		return nil
	})
	waitFor(t, "canary.gw.test", "/", func(a answer) bool { return a.code == 200 && strings.TrimSpace(a.body) == "v1" })

	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.ReleaseSpec{
		Component: "web", Env: []corev1.EnvVar{{Name: "VERSION", Value: "v2"}},
		Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary, Steps: []v1alpha1.ReleaseStep{
			{SetWeight: ptr.To[int32](20)}, {Pause: &v1alpha1.ReleasePause{}}}}}}
	if _, err := xc.KubeosV1alpha1().Releases(ns).Create(ctx, rel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 3*time.Minute, 500*time.Millisecond, func() error {
		r, err := xc.KubeosV1alpha1().Releases(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r.Status.ReleasePhase != v1alpha1.ReleasePaused || r.Status.CanaryWeight == nil || *r.Status.CanaryWeight != 20 {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	// The split shows once the canary's pod is ready and its EndpointSlice reached the gateway.
	waitFor(t, "canary.gw.test", "/", func(a answer) bool { return a.code == 200 && strings.TrimSpace(a.body) == "v2" })
	n := map[string]int{}
	const total = 500
	for range total {
		a, err := get("canary.gw.test", "/")
		if err != nil || a.code != 200 {
			t.Fatalf("during the canary: %v %d %q", err, a.code, a.body)
		}
		n[strings.TrimSpace(a.body)]++
	}
	t.Logf("canary 20 %%: %v", n)
	// 100 of 500 expected (sd ≈ 9): the bounds are six standard deviations wide.
	if n["v1"]+n["v2"] != total || n["v2"] < 45 || n["v2"] > 155 {
		t.Fatalf("answers %v at canary weight 20", n)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"full"}}}`, v1alpha1.PromoteAnnotation)
	if _, err := xc.KubeosV1alpha1().Releases(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 3*time.Minute, 500*time.Millisecond, func() error {
		r, err := xc.KubeosV1alpha1().Releases(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r.Status.ReleasePhase != v1alpha1.ReleaseSucceeded {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	// Promoted: the stable pods run v2; every answer (canary Services gone) is v2.
	servertest.Eventually(t, 2*time.Minute, 500*time.Millisecond, func() error {
		for range 20 {
			a, err := get("canary.gw.test", "/")
			if err != nil {
				return err
			}
			if a.code != 200 || strings.TrimSpace(a.body) != "v2" {
				return fmt.Errorf("after promotion: %d %q", a.code, a.body)
			}
		}
		return nil
	})
}
