package servicesnet

import (
	"fmt"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/test/netharness"
)

// TestHairpinAndSessionAffinity: a pod reaches itself through its own Service (hairpin,
// masqueraded), and with sessionAffinity ClientIP ten requests of one client land on one
// of three endpoints.
func TestHairpinAndSessionAffinity(t *testing.T) {
	cs := c.Clientset(t)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "self", c.A.Name, "self")
	for _, n := range []string{"st-a1", "st-a2", "st-b1"} {
		node := c.A.Name
		if strings.HasSuffix(n, "b1") {
			node = c.B.Name
		}
		backend(t, cs, ns, n, node, "sticky")
	}
	client(t, cs, ns, "client", c.B.Name)
	waitReady(t, cs, ns, "self", "st-a1", "st-a2", "st-b1")
	self := service(t, cs, ns, "self", "self", nil)
	sticky := service(t, cs, ns, "sticky", "sticky", func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	})
	eventually(t, "hairpin", func() error {
		body, err := getFromPod(t, ns, "self", fmt.Sprintf("http://%s/", self.Spec.ClusterIP))
		if err == nil && body != "self" {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
	url := fmt.Sprintf("http://%s/", sticky.Spec.ClusterIP)
	eventually(t, "sticky Service answers", func() error { _, err := getFromPod(t, ns, "client", url); return err })
	out, err := c.Exec(t, ns, "client", "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do "+podGet(url)+" || echo failed; done")
	if err != nil {
		t.Fatal(err)
	}
	answers := strings.Fields(out)
	if len(answers) != 10 {
		t.Fatalf("answers %q", out)
	}
	for _, a := range answers {
		if a != answers[0] || a == "failed" {
			t.Fatalf("session affinity broken: %q", answers)
		}
	}
}

// TestPortForwardService: kubectl 1.33 port-forward svc/x reaches one of its pods.
func TestPortForwardService(t *testing.T) {
	cs := c.Clientset(t)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "pf", c.B.Name, "pf")
	waitReady(t, cs, ns, "pf")
	service(t, cs, ns, "pf", "pf", nil)
	port := portForward(t, ns, "svc/pf", "80")
	body, err := get(fmt.Sprintf("http://%s/", net.JoinHostPort("127.0.0.1", port)))
	if err != nil || body != "pf" {
		t.Fatalf("through port-forward: %q, %v", body, err)
	}
}
