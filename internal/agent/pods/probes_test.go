package pods

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestForgetPodKeepsOtherPods: a pod that stops drops its own containers' probe results
// only. Another pod's container stays ready at once, without waiting for its next probe
// (dropping every pod's results made each stable pod of a node unready for up to a probe
// period whenever any pod of the node was deleted: no ready endpoint behind a Service).
func TestForgetPodKeepsOtherPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec := func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) { return nil, nil, nil }
	p := newProbes(exec, func(*corev1.Pod, string, string) {})
	c := &corev1.Container{Name: "main", ReadinessProbe: &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
	}}
	mk := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
	}
	a, b := mk("a"), mk("b")
	started := time.Now().Add(-time.Hour)
	ready := func(po *corev1.Pod, id string) bool {
		_, r, _ := p.state(ctx, po, c, id, "10.0.0.1", started, func() {})
		return r
	}
	deadline := time.Now().Add(30 * time.Second)
	for !ready(a, "a1") || !ready(b, "b1") {
		if time.Now().After(deadline) {
			t.Fatal("the probes did not make both containers ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.forgetPod(a.UID)
	if !ready(b, "b1") {
		t.Error("pod b's container unready after pod a was forgotten")
	}
	if ready(a, "a1") {
		t.Error("pod a's container kept its result after it was forgotten")
	}
	p.forgetPod(a.UID)
	p.forgetPod(b.UID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.byID) != 0 {
		t.Errorf("results left after both pods were forgotten: %v", p.byID)
	}
}
