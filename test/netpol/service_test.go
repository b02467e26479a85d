package netpol

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubeos.dev/kube/internal/agent/netpol/netpoltest"
	"kubeos.dev/kube/internal/server/servertest"
)

// TestThroughService: a policy applies to connections sent to a ClusterIP as to the pod's
// address (filtering follows the Service proxy's DNAT). Without a policy y/b and z/b reach
// x/a through the Service; with ingress to x/a allowed only from namespace y, z/b is
// refused and y/b still connects. y/b runs on x/a's node (A), z/b on node B.
func TestThroughService(t *testing.T) {
	m := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := m.Apply(ctx, netpoltest.Case{Name: "none", Policies: func(netpoltest.Env) []*networkingv1.NetworkPolicy { return nil }}); err != nil {
		t.Fatal(err)
	}
	svc, err := m.CS.CoreV1().Services("x").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s-x-a"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"pod": "a"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("serve-80-tcp")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.CS.CoreV1().Services("x").Delete(context.Background(), "s-x-a", metav1.DeleteOptions{}) })
	vip := svc.Spec.ClusterIP
	connects := func(from string) (bool, error) {
		ns, pod, _ := strings.Cut(from, "/")
		out, err := m.Exec(ctx, ns, pod, "sh", "-c", fmt.Sprintf(`if nc -w 2 %s 8000 </dev/null >/dev/null 2>&1; then echo yes; else echo no; fi`, vip))
		return strings.TrimSpace(out) == "yes", err
	}
	expect := func(what string, want map[string]bool) {
		t.Helper()
		servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
			for from, w := range want {
				got, err := connects(from)
				if err != nil {
					return err
				}
				if got != w {
					return fmt.Errorf("%s: %s -> %s:8000 (x/a) connects %v, want %v", what, from, vip, got, w)
				}
			}
			return nil
		})
	}
	expect("no policy", map[string]bool{"y/b": true, "z/b": true})
	allowY := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-y"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}}}},
	}}
	if err := m.Apply(ctx, netpoltest.Case{Name: "allow-y", Policies: func(netpoltest.Env) []*networkingv1.NetworkPolicy { return []*networkingv1.NetworkPolicy{allowY} }}); err != nil {
		t.Fatal(err)
	}
	expect("ingress to x/a only from y", map[string]bool{"y/b": true, "z/b": false})
}
