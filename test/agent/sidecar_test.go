package agent

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// busyboxContainer is one more busybox container running sh -c script.
func busyboxContainer(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: busyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script}}
}

// untilTerm is a container script that runs until SIGTERM and exits 0 on it (a busybox
// shell as PID 1 would ignore the signal without a trap).
const untilTerm = `trap 'exit 0' TERM; while true; do sleep 0.2; done`

func containerStatusOf(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// TestSidecarContainers: init containers with restartPolicy Always as the kubelet runs them.
func TestSidecarContainers(t *testing.T) {
	t.Parallel()
	always := corev1.ContainerRestartPolicyAlways

	// A Job-like pod (restartPolicy Never): the init container after the sidecar starts only
	// once the sidecar's startup probe passed (it fails the pod otherwise), the sidecar runs
	// beside the main container and counts for readiness, and once the main container
	// completed the sidecar is stopped and the pod Succeeds.
	t.Run("job", func(t *testing.T) {
		t.Parallel()
		cs := clientset(t)
		ns := namespace(t, cs)
		ctx := ctxT(t, 3*time.Minute)
		// The main container lingers a second after it saw the file: its exit kills every
		// process of its pid namespace, the exec'd touch too if it has not exited yet (137).
		p := busyboxPod("job", nodeName, `test -f /shared/sidecar-started || exit 7; while [ ! -f /tmp/finish ]; do sleep 0.2; done; sleep 1`)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		mount := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
		p.Spec.Containers[0].VolumeMounts = mount
		sidecar := busyboxContainer("proxy", `trap 'exit 0' TERM; sleep 2; touch /tmp/up /shared/sidecar-started; while true; do sleep 0.2; done`)
		sidecar.RestartPolicy = &always
		sidecar.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/up"}}}, PeriodSeconds: 1, FailureThreshold: 60}
		sidecar.VolumeMounts = mount
		check := busyboxContainer("check", `test -f /shared/sidecar-started`)
		check.VolumeMounts = mount
		p.Spec.InitContainers = []corev1.Container{busyboxContainer("setup", "true"), sidecar, check}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := waitPod(t, cs, ns, "job", 90*time.Second, "Ready with its sidecar", func(p *corev1.Pod) bool {
			return podReady(p) || p.Status.Phase == corev1.PodFailed
		})
		if got.Status.Phase != corev1.PodRunning {
			t.Fatalf("phase %s, want Running (the init container after the sidecar ran before its startup probe passed?): %+v", got.Status.Phase, got.Status.InitContainerStatuses)
		}
		if podCondition(got, corev1.PodInitialized) != corev1.ConditionTrue {
			t.Errorf("Initialized %s with the sidecar running", podCondition(got, corev1.PodInitialized))
		}
		for _, name := range []string{"setup", "check"} {
			s := containerStatusOf(got.Status.InitContainerStatuses, name)
			if s == nil || s.State.Terminated == nil || s.State.Terminated.Reason != "Completed" || !s.Ready {
				t.Errorf("init container %s: %+v, want terminated Completed and ready", name, s)
			}
		}
		s := containerStatusOf(got.Status.InitContainerStatuses, "proxy")
		if s == nil || s.State.Running == nil || s.Started == nil || !*s.Started || !s.Ready {
			t.Errorf("sidecar status %+v, want running, started and ready", s)
		}
		k := newKubectl(t, "1.33")
		if out, errOut, err := k.run("exec", "-n", ns, "job", "-c", "main", "--", "touch", "/tmp/finish"); err != nil {
			t.Fatalf("exec: %q %q %v", out, errOut, err)
		}
		got = waitPod(t, cs, ns, "job", 60*time.Second, "Succeeded", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		if got.Status.Phase != corev1.PodSucceeded {
			t.Errorf("phase %s, want Succeeded: %+v %+v", got.Status.Phase, got.Status.InitContainerStatuses, got.Status.ContainerStatuses)
		}
		if s := containerStatusOf(got.Status.InitContainerStatuses, "proxy"); s == nil || s.State.Terminated == nil {
			t.Errorf("sidecar after the main container completed: %+v, want terminated", s)
		}
		if s := containerStatusOf(got.Status.ContainerStatuses, "main"); s == nil || s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			t.Errorf("main container %+v, want terminated exit 0", s)
		}
	})

	// A service pod (restartPolicy Always): a sidecar that keeps exiting is restarted while
	// the main container runs on, not re-initialized; at deletion the sidecars get their
	// stop signal only after the main container exited.
	t.Run("service", func(t *testing.T) {
		t.Parallel()
		cs := clientset(t)
		ns := namespace(t, cs)
		ctx := ctxT(t, 3*time.Minute)
		p := busyboxPod("svc", nodeName, `trap 'sleep 2; exit 0' TERM; while true; do sleep 0.2; done`)
		grace := int64(20)
		p.Spec.TerminationGracePeriodSeconds = &grace
		flaky := busyboxContainer("flaky", `sleep 3; exit 1`)
		flaky.RestartPolicy = &always
		logger := busyboxContainer("logger", untilTerm)
		logger.RestartPolicy = &always
		p.Spec.InitContainers = []corev1.Container{flaky, logger}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, ns, "svc", 90*time.Second, "running with a restarted sidecar", func(p *corev1.Pod) bool {
			f := containerStatusOf(p.Status.InitContainerStatuses, "flaky")
			m := containerStatusOf(p.Status.ContainerStatuses, "main")
			return f != nil && f.RestartCount >= 1 && m != nil && m.State.Running != nil &&
				p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodInitialized) == corev1.ConditionTrue
		})
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "svc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m := containerStatusOf(got.Status.ContainerStatuses, "main"); m.RestartCount != 0 {
			t.Errorf("main container restarted with its sidecar: %+v", m)
		}
		final := deleteAndWatchFinal(t, cs, created)
		m := containerStatusOf(final.Status.ContainerStatuses, "main")
		l := containerStatusOf(final.Status.InitContainerStatuses, "logger")
		if m == nil || m.State.Terminated == nil || m.State.Terminated.ExitCode != 0 {
			t.Fatalf("main's final state %+v, want terminated by its trap (exit 0)", m)
		}
		if l == nil || l.State.Terminated == nil {
			t.Fatalf("sidecar's final state %+v, want terminated", l)
		}
		if l.State.Terminated.FinishedAt.Before(&m.State.Terminated.FinishedAt) {
			t.Errorf("sidecar finished at %s, before the main container (%s): stopped out of order", l.State.Terminated.FinishedAt, m.State.Terminated.FinishedAt)
		}
	})
}

// deleteAndWatchFinal deletes pod gracefully and returns the last state written before the
// agent's final delete removed it.
func deleteAndWatchFinal(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	w, err := cs.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
		}
		if ev.Type == "DELETED" {
			return last
		}
	}
	t.Fatal(fmt.Errorf("watch of pod %s/%s ended before its deletion", pod.Namespace, pod.Name))
	return nil
}
