package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentruntime "kubeos.dev/kube/internal/agent/runtime"
	"kubeos.dev/kube/internal/server/servertest"
)

// TestContainerdRestarted: the agent's own containerd killed with SIGKILL is started again
// by the agent; running pods survive in their shims and new pods run.
func TestContainerdRestarted(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("before", nodeName, "exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := waitPod(t, cs, ns, "before", 90*time.Second, "Running", func(p *corev1.Pod) bool { return podReady(p) })
	pidFile := agentruntime.Layout{Dir: filepath.Join(agentDir, "containerd")}.PidFile()
	readPid := func() int {
		b, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	old := readPid()
	if old <= 0 {
		t.Fatalf("no containerd pid in %s", pidFile)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		if pid := readPid(); pid <= 0 || pid == old || syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("containerd not restarted (pid file says %d, was %d)", pid, old)
		}
		return nil
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("after", nodeName, "exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "after", 90*time.Second, "Ready", podReady)
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "before", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 || a.State.Running == nil {
		t.Errorf("after containerd's restart: %+v, want %s still running", a, b.ContainerID)
	}
}
