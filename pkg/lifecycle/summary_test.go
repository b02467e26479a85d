package lifecycle

import (
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// thing is a minimal managed object.
type thing struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status Status
}

func (t *thing) LifecycleStatus() *Status { return &t.Status }
func (t *thing) DeepCopyObject() runtime.Object {
	c := *t
	t.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	t.Status.DeepCopyInto(&c.Status)
	return &c
}

func mk(ns, name string, phase Phase, conds ...metav1.Condition) *thing {
	return &thing{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: Status{Phase: phase, Conditions: conds}}
}

func TestSummaryHealth(t *testing.T) {
	e, err := NewEngine(EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rec := func(at time.Time) metav1.Condition {
		return metav1.Condition{Type: ConditionReconciling, Status: "True", LastTransitionTime: metav1.NewTime(at)}
	}
	stalled := metav1.Condition{Type: ConditionStalled, Status: "True"}
	objs := []*thing{
		mk("a", "x", PhaseActive), mk("a", "y", PhaseReconciling, rec(t0.Add(time.Minute))), mk("a", "z", PhaseReconciling, rec(t0)),
		mk("a", "f", PhaseFailed, stalled), mk("b", "x", PhaseActive), mk("b", "d", PhaseDeleting, stalled),
	}
	for _, o := range objs {
		e.sum.observe(Ref{Kind: "T", Namespace: o.Namespace, Name: o.Name}, o, o.Status.Phase)
	}
	h := e.Health("T", "a", false)
	if h.Total != 4 || h.Phases[PhaseActive] != 1 || h.Phases[PhaseReconciling] != 2 || h.Phases[PhaseFailed] != 1 || h.Stalled != 1 {
		t.Fatalf("namespace a: %+v", h)
	}
	if h.OldestReconciling == nil || h.OldestReconciling.Name != "z" || !h.ReconcilingSince.Equal(t0) {
		t.Fatalf("oldest reconciling: %v since %v", h.OldestReconciling, h.ReconcilingSince)
	}
	all := e.Health("T", "", true)
	if all.Total != 6 || all.Stalled != 2 || all.Phases[PhaseDeleting] != 1 {
		t.Fatalf("all: %+v", all)
	}
	// z becomes Active: counts move, the oldest Reconciling is y; deleting b/d goes.
	e.sum.observe(Ref{Kind: "T", Namespace: "a", Name: "z"}, mk("a", "z", PhaseActive), PhaseActive)
	e.sum.forget(Ref{Kind: "T", Namespace: "b", Name: "d"})
	h = e.Health("T", "a", false)
	if h.Phases[PhaseActive] != 2 || h.Phases[PhaseReconciling] != 1 || h.OldestReconciling.Name != "y" {
		t.Fatalf("after update: %+v", h)
	}
	if all := e.Health("T", "", true); all.Total != 5 || all.Stalled != 1 {
		t.Fatalf("after forget: %+v", all)
	}
	ref := Ref{Kind: "T", Namespace: "a", Name: "f"}
	e.sum.reconciled(ref, errors.New("boom"), t0, 5*time.Second)
	e.sum.reconciled(ref, nil, t0, 0)
	e.sum.reconciled(ref, errors.New("again"), t0, 7*time.Second)
	st, ok := e.State(ref)
	if !ok || st.LastError != "again" || !st.NextAttempt.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("state: %+v", st)
	}
	if h := e.Health("T", "a", false); h.Reconciles != 3 || h.Errors != 2 {
		t.Fatalf("reconcile counts: %+v", h)
	}
	if e.Health("U", "a", false).Total != 0 {
		t.Fatal("unknown kind has objects")
	}
}

func TestQuantile(t *testing.T) {
	b := func(le float64, n uint64) *dto.Bucket { return &dto.Bucket{UpperBound: &le, CumulativeCount: &n} }
	h := func(total uint64, bs ...*dto.Bucket) *dto.Histogram {
		return &dto.Histogram{SampleCount: &total, Bucket: bs}
	}
	for _, tc := range []struct {
		h    *dto.Histogram
		q    float64
		want float64
	}{
		{h(0), 0.99, 0},
		{h(100, b(0.01, 50), b(0.1, 99), b(1, 100)), 0.99, 0.1},
		{h(100, b(0.01, 50), b(0.1, 98), b(1, 100)), 0.99, 1},
		{h(10, b(0.01, 10)), 0.5, 0.01},
	} {
		if got := Quantile(tc.h, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}
