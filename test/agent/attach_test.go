package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestAttach: kubectl 1.27 and 1.33 attach to a container reading its stdin, and the line
// they send reaches it (its answer is in its log). kubectl ends the session at its stdin's
// EOF, so the answer is read from the log rather than from attach's own output.
func TestAttach(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	p := busyboxPod("reader", nodeName, `while read l; do echo "got $l"; done`)
	p.Spec.Containers[0].Stdin = true
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "reader", 90*time.Second, "Ready", podReady)
	for _, v := range []string{"1.27", "1.33"} {
		k := newKubectl(t, v)
		out, errOut, err := servertest.RunKubectl(k.bin, k.home, srv.Kubeconfig, "hello-"+v+"\n", "attach", "-i", "-n", ns, "reader")
		if err != nil {
			t.Errorf("kubectl %s attach: %q %q %v", v, out, errOut, err)
		}
	}
	// What attach sent reached the container's stdin: its answers are in its log.
	servertest.Eventually(t, 20*time.Second, 200*time.Millisecond, func() error {
		raw, err := cs.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(raw), "got hello-1.27") || !strings.Contains(string(raw), "got hello-1.33") {
			return fmt.Errorf("log %q %v", raw, err)
		}
		return nil
	})
}
