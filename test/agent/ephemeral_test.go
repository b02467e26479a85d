package agent

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestKubectlDebug: `kubectl debug -it pod --image=busybox --target=main -- sh` with
// kubectl 1.27 and 1.33 adds an ephemeral container that runs in the pod, sees the target
// container's processes (their pid namespace is shared) and takes the shell's input; its
// status is in ephemeralContainerStatuses, and it is not restarted once it exited.
func TestKubectlDebug(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 4*time.Minute)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("target", nodeName, "exec sleep 123456"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "target", 90*time.Second, "Ready", podReady)
	for _, v := range []string{"1.27", "1.33"} {
		k := newKubectl(t, v)
		out, err := k.debugSession(ctx, "ps; echo debug-done-$((6*7))\n", "debug-done-42", "debug", "-i", "-t", "-n", ns, "target",
			"--image="+busyboxImage, "--image-pull-policy=Never", "--target=main", "--", "sh")
		if err != nil {
			t.Errorf("kubectl %s debug: %v\noutput %q", v, err, out)
			continue
		}
		if !strings.Contains(out, "sleep 123456") {
			t.Errorf("kubectl %s debug --target=main: the target's process is not in ps: %q", v, out)
		}
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.EphemeralContainers) != 2 {
		t.Fatalf("ephemeral containers %+v, want kubectl's two", p.Spec.EphemeralContainers)
	}
	waitPod(t, cs, ns, "target", 30*time.Second, "with both debug containers terminated", func(p *corev1.Pod) bool {
		if len(p.Status.EphemeralContainerStatuses) != 2 {
			return false
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 || s.RestartCount != 0 {
				return false
			}
		}
		return true
	})
	if p, err = cs.CoreV1().Pods(ns).Get(ctx, "target", metav1.GetOptions{}); err != nil || !podReady(p) || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the target pod after debugging: ready %v, %+v (%v)", podReady(p), p.Status.ContainerStatuses, err)
	}
}

// debugSession runs kubectl args with stdin kept open: it sends input, reads kubectl's
// output until want shows (kubectl ends an attach without a terminal at its stdin's EOF,
// before the answer could come back), then sends exit and closes stdin. It returns the
// output.
func (k *kubectl) debugSession(ctx context.Context, input, want string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = []string{"HOME=" + k.home, "KUBECONFIG=" + srv.Kubeconfig, "KUBECACHEDIR=" + filepath.Join(k.home, "cache"), "PATH=/usr/bin:/bin"}
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	var out servertest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	if _, err := io.WriteString(in, input); err != nil {
		return out.String(), err
	}
	for !strings.Contains(out.String(), want) {
		select {
		case <-ctx.Done():
			return out.String(), fmt.Errorf("no %q in kubectl's output: %w", want, ctx.Err())
		case err := <-done:
			done <- err
			return out.String(), fmt.Errorf("kubectl ended before %q showed: %v", want, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, _ = io.WriteString(in, "exit\n")
	_ = in.Close()
	select {
	case err := <-done:
		done <- err
		if err != nil {
			return out.String(), fmt.Errorf("kubectl after exit: %w", err)
		}
		return out.String(), nil
	case <-ctx.Done():
		return out.String(), fmt.Errorf("kubectl did not end after exit: %w", ctx.Err())
	}
}
