package simnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod(policy corev1.RestartPolicy, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "7", Annotations: ann},
		Spec: corev1.PodSpec{NodeName: "sim-1", RestartPolicy: policy, Containers: []corev1.Container{{Name: "app", Image: "img"}}}}
}

func mustCompile(t *testing.T, st []Stage) *table {
	t.Helper()
	tb, err := compile(st)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func counter() func() uint32 {
	ip := uint32(0x0a800002)
	return func() uint32 { ip++; return ip }
}

// TestDefaultStagesLifecycle walks a pod through the default table the way the simulator
// does: zero-delay stages coalesce into one write; delayed stages wait.
func TestDefaultStagesLifecycle(t *testing.T) {
	tb := mustCompile(t, DefaultStages(10*time.Second))
	now := time.Unix(1000, 0)
	zero := func() float64 { return 0 }
	cases := []struct {
		name      string
		policy    corev1.RestartPolicy
		deleting  bool
		wantPhase corev1.PodPhase
		wantState cstate
		wantNext  string // the delayed stage left waiting
	}{
		{"always runs and stays", corev1.RestartPolicyAlways, false, corev1.PodRunning, stateRunning, ""},
		{"never runs then completes", corev1.RestartPolicyNever, false, corev1.PodRunning, stateRunning, "pod-complete"},
		{"deleted before start terminates first", corev1.RestartPolicyAlways, true, corev1.PodSucceeded, stateTerminated, "pod-delete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := viewOf(testPod(c.policy, nil), tb, shapes{})
			v.deleting = c.deleting
			changed, stage, due := tb.plan(v, now, now, zero, counter(), false)
			if !changed || v.phase() != c.wantPhase || v.state != c.wantState {
				t.Fatalf("changed %v phase %s state %d", changed, v.phase(), v.state)
			}
			if (v.ip == 0) != c.deleting || v.startTime != now.Unix() {
				t.Errorf("ip %d startTime %d", v.ip, v.startTime)
			}
			got := ""
			if stage >= 0 {
				got = tb.stages[stage].Name
			}
			if got != c.wantNext {
				t.Fatalf("next stage %q, want %q", got, c.wantNext)
			}
			if c.wantNext == "pod-complete" && !due.Equal(now.Add(10*time.Second)) {
				t.Errorf("complete due %s", due)
			}
			if c.wantNext == "pod-delete" && !due.Equal(now) {
				t.Errorf("delete due %s (after the terminal status is written, at once)", due)
			}
		})
	}
}

func TestRunTimeAnnotationAndDelayFrom(t *testing.T) {
	tb := mustCompile(t, DefaultStages(10*time.Second))
	v := viewOf(testPod(corev1.RestartPolicyOnFailure, map[string]string{RunTimeAnnotation: "3s"}), tb, shapes{})
	v.state, v.startedAt, v.ready = stateRunning, 500, true
	i := tb.match(v)
	if i < 0 || tb.stages[i].Name != "pod-complete" {
		t.Fatalf("stage %d", i)
	}
	if due := tb.due(i, v, time.Unix(900, 0), 0); !due.Equal(time.Unix(503, 0)) {
		t.Fatalf("due %s, want started + 3s", due)
	}
}

func TestCrashLoopBackoff(t *testing.T) {
	crash := Stage{Name: "crash", Selector: Selector{MatchLabels: map[string]string{"crash": "yes"},
		MatchExpressions: []Expression{{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
		Next: Next{Containers: CrashLoopBackOff}}
	tb := mustCompile(t, append([]Stage{crash}, DefaultStages(-1)...))
	p := testPod(corev1.RestartPolicyAlways, nil)
	p.Labels = map[string]string{"crash": "yes"}
	v := viewOf(p, tb, shapes{})
	now := time.Unix(1000, 0)
	zero := func() float64 { return 0 }
	for restarts := int32(1); restarts <= 6; restarts++ {
		changed, stage, due := tb.plan(v, now, now, zero, counter(), false)
		if !changed || v.state != stateCrashLoop || v.restarts != restarts || v.phase() != corev1.PodRunning {
			t.Fatalf("restart %d: changed %v state %d restarts %d", restarts, changed, v.state, v.restarts)
		}
		if v.last == nil || v.last.exitCode != 1 || v.last.reason != "Error" {
			t.Fatalf("last termination %+v", v.last)
		}
		want := min(10*time.Second<<(restarts-1), 5*time.Minute)
		if tb.stages[stage].Name != "pod-restart" || due.Sub(now) != want {
			t.Fatalf("restart %d: stage %s after %s, want pod-restart after %s", restarts, tb.stages[stage].Name, due.Sub(now), want)
		}
		v.apply(&tb.stages[stage].Next, now.Unix(), counter())
	}
	// Under restartPolicy Never the crash is final: Failed.
	p = testPod(corev1.RestartPolicyNever, nil)
	p.Labels = map[string]string{"crash": "yes"}
	v = viewOf(p, tb, shapes{})
	tb.plan(v, now, now, zero, counter(), false)
	if v.phase() != corev1.PodFailed || v.exitCode != 1 || v.restarts != 0 {
		t.Fatalf("never: phase %s exit %d restarts %d", v.phase(), v.exitCode, v.restarts)
	}
}

func TestSelectorOperators(t *testing.T) {
	mk := func(e ...Expression) *table {
		return mustCompile(t, []Stage{{Name: "s", Selector: Selector{MatchExpressions: e}, Next: Next{Delete: true}}})
	}
	cases := []struct {
		e    Expression
		want bool
	}{
		{Expression{Key: ".spec.restartPolicy", Operator: "In", Values: []string{"Always"}}, true},
		{Expression{Key: ".spec.restartPolicy", Operator: "NotIn", Values: []string{"Always"}}, false},
		{Expression{Key: ".status.phase", Operator: "In", Values: []string{"Pending"}}, true},
		{Expression{Key: ".status.podIP", Operator: "DoesNotExist"}, true},
		{Expression{Key: ".metadata.deletionTimestamp", Operator: "Exists"}, false},
		{Expression{Key: "metadata.annotations.a", Operator: "In", Values: []string{"1"}}, true},
		{Expression{Key: "metadata.annotations.b", Operator: "NotIn", Values: []string{"1"}}, true},
		{Expression{Key: "metadata.labels.a", Operator: "Exists"}, false},
		{Expression{Key: ".spec.containers.image", Operator: "In", Values: []string{"img"}}, true},
		{Expression{Key: ".spec.containers.image", Operator: "In", Values: []string{"other:2"}}, false},
	}
	for _, c := range cases {
		tb := mk(c.e)
		w := viewOf(testPod(corev1.RestartPolicyAlways, map[string]string{"a": "1"}), tb, shapes{})
		if got := tb.match(w) == 0; got != c.want {
			t.Errorf("%+v: match %v, want %v", c.e, got, c.want)
		}
	}
}

func TestCompileRefusesBadStages(t *testing.T) {
	cases := map[string]Stage{
		"unknown key":      {Name: "s", Selector: Selector{MatchExpressions: []Expression{{Key: ".spec.foo", Operator: "Exists"}}}, Next: Next{Delete: true}},
		"is not In, NotIn": {Name: "s", Selector: Selector{MatchExpressions: []Expression{{Key: ".status.phase", Operator: "Gt"}}}, Next: Next{Delete: true}},
		"needs values":     {Name: "s", Selector: Selector{MatchExpressions: []Expression{{Key: ".status.phase", Operator: "In"}}}, Next: Next{Delete: true}},
		"does nothing":     {Name: "s"},
		"is not one of":    {Name: "s", Next: Next{Containers: "Sleeping"}},
		"without a name":   {Next: Next{Delete: true}},
	}
	for want, st := range cases {
		if _, err := compile([]Stage{st}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", st, err, want)
		}
	}
}

func TestLoadStagesYAML(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stages.yaml")
	os.WriteFile(p, []byte(`
- name: slow-ready
  selector:
    matchAnnotations: {slow: "true"}
    matchExpressions:
    - {key: .status.containerStatuses.reason, operator: In, values: [ContainerCreating]}
  delay: 5s
  jitter: 1s
  next: {containers: Running, ready: false}
`), 0o644)
	st, err := LoadStages(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Delay.Duration != 5*time.Second || st[0].Next.Ready == nil || *st[0].Next.Ready {
		t.Fatalf("%+v", st)
	}
	os.WriteFile(p, []byte("- name: x\n  next: {delete: true}\n  bogus: 1\n"), 0o644)
	if _, err := LoadStages(p); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestPodRange(t *testing.T) {
	r, err := newPodRange("10.244.3.0/24")
	if err != nil {
		t.Fatal(err)
	}
	first := r.allocate()
	if ipString(first) != "10.244.3.2" {
		t.Fatalf("first %s", ipString(first))
	}
	n := 1
	for r.allocate() != 0 {
		n++
	}
	if n != 253 { // .2 … .254
		t.Fatalf("%d addresses", n)
	}
	r.release(first)
	if r.allocate() != first {
		t.Fatal("released address not reused")
	}
	small, _ := newPodRange("10.0.0.0/28")
	m := 0
	for small.allocate() != 0 {
		m++
	}
	if m != 13 {
		t.Fatalf("/28: %d addresses", m)
	}
}

// TestReadyRestored: a running, ready pod whose Ready condition someone else set False
// (the node lifecycle controller, while its node's Lease was late) gets Ready=True written
// back after the kubelet's status sync period, its containers untouched.
func TestReadyRestored(t *testing.T) {
	tb := mustCompile(t, DefaultStages(-1))
	now := time.Unix(1000, 0)
	zero := func() float64 { return 0 }
	v := viewOf(testPod(corev1.RestartPolicyAlways, nil), tb, shapes{})
	tb.plan(v, now, now, zero, counter(), false)
	if v.state != stateRunning || v.readyWritten != corev1.ConditionTrue {
		t.Fatalf("started: state %d, Ready written %q", v.state, v.readyWritten)
	}
	started := v.startedAt
	v.readyWritten = corev1.ConditionFalse // as observed from the controller's write
	later := now.Add(time.Minute)
	changed, stage, due := tb.plan(v, later, later, zero, counter(), false)
	if changed || stage < 0 || tb.stages[stage].Name != "pod-ready-restore" || !due.Equal(later.Add(10*time.Second)) {
		t.Fatalf("changed %v, stage %d, due %s; want pod-ready-restore 10 s later", changed, stage, due)
	}
	at := later.Add(10 * time.Second)
	changed, stage, _ = tb.plan(v, at, later, zero, counter(), false)
	if !changed || stage >= 0 || v.readyWritten != corev1.ConditionTrue || v.startedAt != started || v.restarts != 0 {
		t.Fatalf("restored: changed %v stage %d Ready %q startedAt %d (was %d) restarts %d", changed, stage, v.readyWritten, v.startedAt, started, v.restarts)
	}
	// Not ready containers: Ready=False is what the kubelet writes too; nothing to restore.
	v.ready, v.readyWritten = false, corev1.ConditionFalse
	if i := tb.match(v); i >= 0 {
		t.Fatalf("not ready containers matched %s", tb.stages[i].Name)
	}
}
