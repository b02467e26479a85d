package workload

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

// TestSampleAPIServer: upstream's k8s.io/sample-apiserver (built from the module, a tool of
// go.mod), with an etcd of its own, delegating authentication and authorization to Kube and
// trusting Kube's front-proxy CA from extension-apiserver-authentication, is registered
// through an APIService; its flunders and fischers then work through Kube with kubectl 1.27
// and 1.33, its BanFlunder admission included.
func TestSampleAPIServer(t *testing.T) {
	// Building sample-apiserver takes minutes on a cold cache: more than ctxT's minute.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sample := startSampleAPIServer(t, ctx, "wardle-sample")
	sample.register(t, ctx, "v1alpha1", "v1beta1")

	for i, v := range []string{"1.33", "1.27"} {
		k := newKubectl(t, v)
		servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
			out, err := k.run("", "api-resources", "--api-group=wardle.example.com")
			if err != nil || !strings.Contains(out, "flunders") || !strings.Contains(out, "fischers") {
				return fmt.Errorf("api-resources: %v\n%s", err, out)
			}
			return nil
		})
		flunder := fmt.Sprintf("flunder-%d", i)
		k.ok(fmt.Sprintf(`apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: %s, namespace: default}
spec: {reference: x}
`, flunder), "create", "-f", "-")
		if out := k.ok("", "get", "flunders", "-n", "default"); !strings.Contains(out, flunder) {
			t.Fatalf("kubectl %s get flunders:\n%s", v, out)
		}
		if out := k.ok("", "get", "flunder", flunder, "-n", "default", "-o", "jsonpath={.metadata.name}"); out != flunder {
			t.Fatalf("kubectl %s get flunder: %q", v, out)
		}
		k.ok("", "delete", "flunder", flunder, "-n", "default")
	}

	// sample-apiserver's own admission (BanFlunder): a Fischer disallows a name.
	k := newKubectl(t, "1.33")
	k.ok(`apiVersion: wardle.example.com/v1alpha1
kind: Fischer
metadata: {name: strict}
disallowedFlunders: [forbidden-flunder]
`, "create", "-f", "-")
	servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
		out, err := k.run(`apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: forbidden-flunder, namespace: default}
`, "create", "-f", "-")
		if err == nil {
			k.run("", "delete", "flunder", "forbidden-flunder", "-n", "default")
			return fmt.Errorf("a disallowed flunder was created: %s", out)
		}
		if !strings.Contains(out, "forbidden-flunder") {
			return fmt.Errorf("refusal: %s", out)
		}
		return nil
	})
}

// freePort is a TCP port free on ip.
func freePort(t testing.TB, ip string) int {
	t.Helper()
	p, err := slot.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
