package simnode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestKubectl: with kubectl 1.27 and 1.33, `kubectl get nodes` lists the simulated nodes
// Ready, and pods put on one by `kubectl run --overrides` or a manifest with nodeName run.
func TestKubectl(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	for _, v := range []string{"1.27", "1.33"} {
		t.Run(v, func(t *testing.T) {
			bin, err := servertest.FindKubectl(v)
			if err != nil {
				t.Fatal(err)
			}
			home := t.TempDir()
			kubectl := func(stdin string, args ...string) string {
				t.Helper()
				out, errOut, err := servertest.RunKubectl(bin, home, srv.Kubeconfig, stdin, args...)
				if err != nil {
					t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
				}
				return out
			}
			out := kubectl("", "get", "nodes", "-l", "type=kube-sim")
			for i := 1; i <= nodes; i++ {
				found := false
				for _, line := range strings.Split(out, "\n") {
					f := strings.Fields(line)
					if len(f) >= 2 && f[0] == nodeName(i) && f[1] == "Ready" {
						found = true
					}
				}
				if !found {
					t.Errorf("kubectl get nodes: %s not Ready:\n%s", nodeName(i), out)
				}
			}
			ns := namespace(t, cs)
			// The namespace's ServiceAccount must exist before pods are admitted.
			servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
				_, errOut, err := servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "-n", ns, "get", "serviceaccount", "default")
				if err != nil {
					return fmt.Errorf("%v: %s", err, errOut)
				}
				return nil
			})
			kubectl("", "-n", ns, "run", "x", "--image=busybox", "--restart=Always", `--overrides={"apiVersion":"v1","spec":{"nodeName":"`+nodeName(3)+`"}}`, "--", "sleep", "3600")
			kubectl(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: manifest}
spec:
  nodeName: %s
  containers: [{name: app, image: busybox, command: [sleep, "3600"]}]
`, nodeName(4)), "-n", ns, "apply", "-f", "-")
			for _, p := range []string{"x", "manifest"} {
				servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
					out, errOut, err := servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "-n", ns, "get", "pod", p, "--no-headers")
					if err != nil {
						return fmt.Errorf("%v: %s", err, errOut)
					}
					if f := strings.Fields(out); len(f) < 3 || f[1] != "1/1" || f[2] != "Running" {
						return fmt.Errorf("kubectl get pod %s: %s", p, out)
					}
					return nil
				})
			}
			out = kubectl("", "-n", ns, "wait", "--for=condition=Ready", "pod/x", "pod/manifest", "--timeout=30s")
			if strings.Count(out, "condition met") != 2 {
				t.Errorf("kubectl wait: %s", out)
			}
			out = kubectl("", "-n", ns, "get", "pod", "x", "-o", "wide")
			if !strings.Contains(out, nodeName(3)) || !strings.Contains(out, "10.") {
				t.Errorf("kubectl get pod -o wide: no node or IP:\n%s", out)
			}
			kubectl("", "-n", ns, "delete", "pod", "x", "manifest", "--wait=true", "--timeout=30s")
		})
	}
}
