package pods

import (
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// startTrace is when a pod's first start reached each step, for the one "pod startup" log
// line written when its Ready condition is first written True. bench/agent/compare reads
// those lines to split create → Ready into the API's part, the agent's and the runtime's.
type startTrace struct {
	seen         time.Time // the informer handed the pod to a new worker
	synced       time.Time // the first sync began
	sandbox      time.Time // RunPodSandbox called (after the pending status and the cgroup)
	sandboxDone  time.Time // RunPodSandbox returned
	create       time.Time // the first container's CreateContainer called
	createDone   time.Time // CreateContainer returned
	startDone    time.Time // StartContainer returned
	statusWrites int       // status writes up to and including the Ready one
	logged       bool
}

// mark sets *t to now once.
func mark(t *time.Time) {
	if t.IsZero() {
		*t = time.Now()
	}
}

// written notes a status write of st and logs the trace when it is the first Ready one of
// a pod this worker started.
func (t *startTrace) written(log *slog.Logger, key string, st *corev1.PodStatus) {
	if t.logged || t.sandbox.IsZero() {
		return
	}
	t.statusWrites++
	if !podutil.IsPodReadyConditionTrue(*st) {
		return
	}
	t.logged = true
	ms := func(at time.Time) float64 {
		if at.IsZero() {
			return 0
		}
		return float64(at.UnixMicro()) / 1e3
	}
	log.Info("pod startup", "pod", key, "seen", ms(t.seen), "synced", ms(t.synced), "sandbox", ms(t.sandbox),
		"sandboxDone", ms(t.sandboxDone), "create", ms(t.create), "createDone", ms(t.createDone), "startDone", ms(t.startDone),
		"readyWritten", ms(time.Now()), "statusWrites", t.statusWrites)
}
