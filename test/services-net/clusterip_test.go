package servicesnet

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/test/netharness"
)

// TestClusterIPBalancedAndScaleToZero: three endpoints on two nodes behind a ClusterIP
// answer in turn to a pod on node A, to node A itself and to node B; with every endpoint
// gone the ClusterIP refuses connections (ICMP port-unreachable: "connection refused", not
// a hang), and with one back it answers again.
func TestClusterIPBalancedAndScaleToZero(t *testing.T) {
	cs := c.Clientset(t)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "web-a1", c.A.Name, "web")
	backend(t, cs, ns, "web-a2", c.A.Name, "web")
	backend(t, cs, ns, "web-b1", c.B.Name, "web")
	client(t, cs, ns, "client", c.A.Name)
	waitReady(t, cs, ns, "web-a1", "web-a2", "web-b1")
	svc := service(t, cs, ns, "web", "web", nil)
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(svc.Spec.ClusterIP, "80"))

	all := map[string]bool{"web-a1": true, "web-a2": true, "web-b1": true}
	probe := func(name string, get func() (string, error)) {
		t.Helper()
		seen := map[string]bool{}
		eventually(t, name+" reaches all three endpoints", func() error {
			body, err := get()
			if err != nil {
				return err
			}
			if !all[body] {
				return fmt.Errorf("unexpected answer %q", body)
			}
			seen[body] = true
			if len(seen) < 3 {
				return fmt.Errorf("seen %v so far", seen)
			}
			return nil
		})
	}
	probe("node A", func() (string, error) { return get(url) })
	probe("node B", func() (string, error) { return getFrom(context.Background(), c.B, url) })
	probe("a pod on node A", func() (string, error) { return getFromPod(t, ns, "client", url) })

	// Scale to 0: the ClusterIP refuses.
	for n := range all {
		if err := cs.CoreV1().Pods(ns).Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	eventually(t, "node A refused", func() error {
		if err := dial(addr); !refused(err) {
			return fmt.Errorf("dial %s: %v, want connection refused", addr, err)
		}
		return nil
	})
	eventually(t, "node B refused", func() error {
		_, err := getFrom(context.Background(), c.B, url)
		if err == nil || !strings.Contains(err.Error(), "exit status 7") {
			return fmt.Errorf("from node B: %v, want connection refused", err)
		}
		return nil
	})
	eventually(t, "pod refused", func() error {
		_, err := getFromPod(t, ns, "client", url)
		if err == nil || !strings.Contains(err.Error(), "refused") {
			return fmt.Errorf("wget from pod: %v, want connection refused", err)
		}
		return nil
	})
	start := time.Now()
	if err := dial(addr); !refused(err) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	t.Logf("refused after %v", time.Since(start))

	// One back: it answers.
	backend(t, cs, ns, "web-b2", c.B.Name, "web")
	waitReady(t, cs, ns, "web-b2")
	eventually(t, "node A after scale-up", func() error {
		body, err := get(url)
		if err == nil && body != "web-b2" {
			err = fmt.Errorf("answer %q, want web-b2", body)
		}
		return err
	})
}
