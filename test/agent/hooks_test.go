package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubeos.dev/kube/internal/server/servertest"
)

// hookServer records the paths of the requests it gets; lifecycle httpGet hooks with host
// 127.0.0.1 reach it from the agent, which runs in the test's process.
type hookServer struct {
	port int
	mu   sync.Mutex
	hits map[string]int
}

func startHookServer(t *testing.T) *hookServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hookServer{port: l.Addr().(*net.TCPAddr).Port, hits: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
		// Any status answers a hook: upstream fails an httpGet hook only when no answer comes.
		w.WriteHeader(http.StatusInternalServerError)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

func (h *hookServer) hit(path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hits[path] == 0 {
		return fmt.Errorf("no request for %s yet (seen %v)", path, h.hits)
	}
	return nil
}

func (h *hookServer) handler(path string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(h.port), Path: path}}
}

// TestLifecycleHooks: postStart and preStop hooks as the kubelet runs them.
func TestLifecycleHooks(t *testing.T) {
	t.Parallel()

	// httpGet hooks: postStart once the container started, preStop at deletion before the
	// stop signal (the main container still exits through its TERM trap).
	t.Run("httpGet", func(t *testing.T) {
		t.Parallel()
		cs := clientset(t)
		ns := namespace(t, cs)
		ctx := ctxT(t, 2*time.Minute)
		h := startHookServer(t)
		p := busyboxPod("web-hooks", nodeName, untilTerm)
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: h.handler("/post-start"), PreStop: h.handler("/pre-stop")}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, ns, "web-hooks", 90*time.Second, "Ready", podReady)
		if err := h.hit("/post-start"); err != nil {
			t.Errorf("postStart (the container is ready, so its hook has run): %v", err)
		}
		if err := h.hit("/pre-stop"); err == nil {
			t.Error("preStop ran before the pod was deleted")
		}
		final := deleteAndWatchFinal(t, cs, created)
		if err := h.hit("/pre-stop"); err != nil {
			t.Errorf("preStop: %v", err)
		}
		if s := final.Status.ContainerStatuses[0].State.Terminated; s == nil || s.ExitCode != 0 {
			t.Errorf("final state %+v, want the TERM trap's exit 0", final.Status.ContainerStatuses[0].State)
		}
	})

	// exec postStart: what it writes is there for the container to see.
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		cs := clientset(t)
		ns := namespace(t, cs)
		ctx := ctxT(t, 2*time.Minute)
		p := busyboxPod("exec-hook", nodeName, `while [ ! -f /tmp/hook ]; do sleep 0.1; done; echo "saw $(cat /tmp/hook)"; exec sleep 100000`)
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo from-post-start > /tmp/hook"}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, ns, "exec-hook", 90*time.Second, "Ready", podReady)
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			raw, err := cs.CoreV1().Pods(ns).GetLogs("exec-hook", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil || !strings.Contains(string(raw), "saw from-post-start") {
				return fmt.Errorf("log %q %v", raw, err)
			}
			return nil
		})
	})

	// A sleep preStop holds the stop signal back for its seconds, within the grace period.
	t.Run("sleep", func(t *testing.T) {
		t.Parallel()
		cs := clientset(t)
		ns := namespace(t, cs)
		ctx := ctxT(t, 2*time.Minute)
		p := busyboxPod("sleep-hook", nodeName, untilTerm)
		grace := int64(20)
		p.Spec.TerminationGracePeriodSeconds = &grace
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		running := waitPod(t, cs, ns, "sleep-hook", 90*time.Second, "Ready", podReady)
		deleted := time.Now()
		final := deleteAndWatchFinal(t, cs, running)
		s := final.Status.ContainerStatuses[0].State.Terminated
		if s == nil || s.ExitCode != 0 {
			t.Fatalf("final state %+v, want the TERM trap's exit 0", final.Status.ContainerStatuses[0].State)
		}
		// finishedAt has whole seconds: 3 s of sleep leave at least 2 after the delete.
		if d := s.FinishedAt.Sub(deleted); d < 2*time.Second {
			t.Errorf("the container finished %s after the delete: the 3 s preStop sleep did not hold its stop signal back", d)
		}
	})

	// A failing postStart kills the container: a FailedPostStartHook event, and with
	// restartPolicy Never the pod fails.
	t.Run("failing", func(t *testing.T) {
		t.Parallel()
		cs := clientset(t)
		ns := namespace(t, cs)
		ctx := ctxT(t, 2*time.Minute)
		// A shell as PID 1 ignores SIGTERM: the kill ends in SIGKILL after the 2 s grace (a
		// container exiting 0 on TERM would make the pod Succeeded, upstream too).
		p := busyboxPod("bad-hook", nodeName, "exec sleep 100000")
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		grace := int64(2)
		p.Spec.TerminationGracePeriodSeconds = &grace
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo no >&2; exit 3"}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := waitPod(t, cs, ns, "bad-hook", 90*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if s := got.Status.ContainerStatuses[0]; s.State.Terminated == nil || s.State.Terminated.ExitCode == 0 {
			t.Errorf("container %+v, want terminated (killed)", s.State)
		}
		servertest.Eventually(t, 30*time.Second, 300*time.Millisecond, func() error {
			evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedPostStartHook"})
			if err != nil {
				return err
			}
			if len(evs.Items) == 0 || evs.Items[0].Type != corev1.EventTypeWarning || !strings.Contains(evs.Items[0].Message, "exited with 3") {
				return fmt.Errorf("FailedPostStartHook events %+v", evs.Items)
			}
			return nil
		})
	})
}
