package agent

import (
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestGracefulNodeShutdown: SIGTERM to `kube agent --shutdown-grace-period 30s
// --shutdown-grace-period-critical-pods 10s` stops its regular pod first and its critical
// pod (system-node-critical) after it, each through its SIGTERM handler (exit code 0, not
// SIGKILL's 137), writes the kubelet's graceful-shutdown status on both, reports the node
// NotReady ("node is shutting down"), refuses a pod bound to it meanwhile (phase Failed,
// reason NodeShutdown, as the kubelet's admission), and exits 0.
func TestGracefulNodeShutdown(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	node := nodeName + "-stop"
	cidr, br := agentSlot(2)
	a := startAgentProcessWith(t, node, cidr, br, []string{"--kubeconfig", nodeKubeconfig(t, node)},
		"--shutdown-grace-period", "30s", "--shutdown-grace-period-critical-pods", "10s")
	// The deadline starts once the binary is linked (minutes on a loaded machine).
	ctx := ctxT(t, 5*time.Minute)
	waitNode(t, cs, node, 2*time.Minute, "Ready", nodeReady)

	// Each pod ends on SIGTERM with exit code 0 (the trap runs between two sleeps); the
	// regular one takes 10 s over it, the window in which a new pod is refused.
	const script = "trap 'echo stopping; exit 0' TERM; echo up; while true; do sleep 1; done"
	regular := busyboxPod("regular", node, "trap 'echo stopping; sleep 10; exit 0' TERM; echo up; while true; do sleep 1; done")
	regular.Spec.TerminationGracePeriodSeconds = ptr.To[int64](15)
	critical := busyboxPod(node+"-critical", node, script)
	critical.Namespace = "kube-system"
	critical.Spec.PriorityClassName = "system-node-critical"
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, regular, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, critical, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("kube-system").Delete(ctx, critical.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	running := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }
	waitPod(t, cs, ns, "regular", 90*time.Second, "Running", running)
	crit := waitPod(t, cs, "kube-system", critical.Name, 90*time.Second, "Running", running)
	if crit.Spec.Priority == nil || *crit.Spec.Priority < 2000000000 {
		t.Fatalf("critical pod's priority %v", crit.Spec.Priority)
	}

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitNode(t, cs, node, 30*time.Second, "NotReady, shutting down", func(n *corev1.Node) bool {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionFalse && c.Message == "node is shutting down"
			}
		}
		return false
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("late", node, script), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	late := waitPod(t, cs, ns, "late", 30*time.Second, "refused", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if late.Status.Reason != "NodeShutdown" || late.Status.Message != "Pod was rejected: Pod was rejected as the node is shutting down." || len(late.Status.ContainerStatuses) != 0 {
		t.Errorf("pod bound during the shutdown: reason %q, message %q, containers %+v", late.Status.Reason, late.Status.Message, late.Status.ContainerStatuses)
	}
	done := make(chan error, 1)
	cmd := a.cmd
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		a.cmd = nil
		if err != nil {
			t.Errorf("kube agent after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("kube agent did not exit after SIGTERM")
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && (c.Status != corev1.ConditionFalse || c.Message != "node is shutting down") {
			t.Errorf("node Ready condition after the shutdown: %+v", c)
		}
	}
	const msg = "Pod was terminated in response to imminent node shutdown."
	var finished []time.Time
	for _, p := range []struct{ ns, name string }{{ns, "regular"}, {"kube-system", critical.Name}} {
		got, err := cs.CoreV1().Pods(p.ns).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkKilled(t, got, "Terminated", msg)
		if len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Terminated == nil {
			t.Fatalf("pod %s containers %+v", p.name, got.Status.ContainerStatuses)
		}
		term := got.Status.ContainerStatuses[0].State.Terminated
		if term.ExitCode != 0 {
			t.Errorf("pod %s exited %d, want 0 from its SIGTERM handler", p.name, term.ExitCode)
		}
		finished = append(finished, term.FinishedAt.Time)
	}
	if finished[1].Before(finished[0]) {
		t.Errorf("the critical pod finished at %v, before the regular one at %v", finished[1], finished[0])
	}
}
