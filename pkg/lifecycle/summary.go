package lifecycle

import (
	"math"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
)

// ObjectState is what the engine knows of one managed object beyond what the API stores: the
// informer's copy of the object and the outcome of its last reconcile in this process. It
// feeds operator tooling (kube ctl tree, why, why-stuck).
type ObjectState struct {
	// Object is the informer's copy: read-only, never modify it.
	Object Object
	// Phase is the phase as the informer saw it (Pending for a status never written).
	Phase Phase
	// LastReconcile is when this process last finished a reconcile of the object (zero if
	// it never did, e.g. another server holds the controllers' Lease).
	LastReconcile time.Time
	// LastError is the error of that reconcile ("" on success).
	LastError string
	// NextAttempt is when the engine will reconcile the object again (zero: only on change).
	NextAttempt time.Time
}

// KindHealth aggregates the objects of one kind, in one namespace or in all.
type KindHealth struct {
	Kind string
	// Total objects; Phases counts them by phase.
	Total  int
	Phases map[Phase]int
	// Stalled counts objects whose Stalled condition is True (Failed ones, and deletions
	// past their timeout).
	Stalled int
	// OldestReconciling is the object longest in phase Reconciling, since ReconcilingSince.
	OldestReconciling *Ref
	ReconcilingSince  time.Time
	// Reconciles and Errors count reconciles of the kind finished in this process since it
	// started (Errors: with a driver error or a terminal outcome), for all namespaces.
	Reconciles, Errors uint64
	// P99 is the 99th percentile of kube_lifecycle_reconcile_seconds (upper bucket bound;
	// zero without observations).
	P99 time.Duration
}

// summary keeps, incrementally from the informers, per-object state and per kind and
// namespace counts, so health answers in the size of the answer, not of the cluster.
type summary struct {
	mu     sync.RWMutex
	objs   map[Ref]*objState
	counts map[scope]*counts
	runs   map[string]*runCounts
}

type objState struct {
	ObjectState
	stalled          bool
	reconcilingSince time.Time
}

// scope is a kind in one namespace, or in all (all=true).
type scope struct {
	kind, namespace string
	all             bool
}

type counts struct {
	phases      map[Phase]int
	stalled     int
	reconciling map[Ref]time.Time
}

type runCounts struct{ reconciles, errors uint64 }

func newSummary() *summary {
	return &summary{objs: map[Ref]*objState{}, counts: map[scope]*counts{}, runs: map[string]*runCounts{}}
}

func (s *summary) scopes(r Ref) [2]scope {
	return [2]scope{{kind: r.Kind, namespace: r.Namespace}, {kind: r.Kind, all: true}}
}

func (s *summary) count(sc scope) *counts {
	c := s.counts[sc]
	if c == nil {
		c = &counts{phases: map[Phase]int{}, reconciling: map[Ref]time.Time{}}
		s.counts[sc] = c
	}
	return c
}

// add (sign +1) or remove (sign -1) st from the counts of its scopes.
func (s *summary) apply(r Ref, st *objState, sign int) {
	for _, sc := range s.scopes(r) {
		c := s.count(sc)
		c.phases[st.Phase] += sign
		if st.stalled {
			c.stalled += sign
		}
		if st.Phase == PhaseReconciling {
			if sign > 0 {
				c.reconciling[r] = st.reconcilingSince
			} else {
				delete(c.reconciling, r)
			}
		}
		if c.phases[st.Phase] == 0 {
			delete(c.phases, st.Phase)
		}
	}
}

func (s *summary) observe(r Ref, obj Object, phase Phase) {
	st := obj.LifecycleStatus()
	next := &objState{ObjectState: ObjectState{Object: obj, Phase: phase},
		stalled: meta.IsStatusConditionTrue(st.Conditions, ConditionStalled)}
	if phase == PhaseReconciling {
		next.reconcilingSince = obj.GetCreationTimestamp().Time
		if c := meta.FindStatusCondition(st.Conditions, ConditionReconciling); c != nil && c.Status == "True" {
			next.reconcilingSince = c.LastTransitionTime.Time
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.objs[r]; old != nil {
		s.apply(r, old, -1)
		next.LastReconcile, next.LastError, next.NextAttempt = old.LastReconcile, old.LastError, old.NextAttempt
	}
	s.objs[r] = next
	s.apply(r, next, +1)
}

func (s *summary) forget(r Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.objs[r]; old != nil {
		s.apply(r, old, -1)
		delete(s.objs, r)
	}
}

// reconciled records the end of one reconcile of r.
func (s *summary) reconciled(r Ref, err error, now time.Time, requeue time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := s.runs[r.Kind]
	if rc == nil {
		rc = &runCounts{}
		s.runs[r.Kind] = rc
	}
	rc.reconciles++
	if err != nil {
		rc.errors++
	}
	st := s.objs[r]
	if st == nil {
		return
	}
	st.LastReconcile, st.LastError, st.NextAttempt = now, "", time.Time{}
	if err != nil {
		st.LastError = err.Error()
	}
	if requeue > 0 {
		st.NextAttempt = now.Add(requeue)
	}
}

// State returns what the engine knows of ref, and whether the informers have seen it.
func (e *Engine) State(ref Ref) (ObjectState, bool) {
	e.sum.mu.RLock()
	defer e.sum.mu.RUnlock()
	st, ok := e.sum.objs[ref]
	if !ok {
		return ObjectState{}, false
	}
	return st.ObjectState, true
}

// Health aggregates the objects of kind in namespace ("" with all: every namespace, and the
// objects of a cluster-scoped kind). Its cost is the number of phases and Reconciling objects
// in that scope, not the number of objects.
func (e *Engine) Health(kind, namespace string, all bool) KindHealth {
	h := KindHealth{Kind: kind, Phases: map[Phase]int{}}
	sc := scope{kind: kind, namespace: namespace}
	if all {
		sc = scope{kind: kind, all: true}
	}
	e.sum.mu.RLock()
	if c := e.sum.counts[sc]; c != nil {
		for p, n := range c.phases {
			h.Phases[p] = n
			h.Total += n
		}
		h.Stalled = c.stalled
		for r, since := range c.reconciling {
			if h.OldestReconciling == nil || since.Before(h.ReconcilingSince) ||
				(since.Equal(h.ReconcilingSince) && compareRefs(r, *h.OldestReconciling) < 0) {
				r := r
				h.OldestReconciling, h.ReconcilingSince = &r, since
			}
		}
	}
	if rc := e.sum.runs[kind]; rc != nil {
		h.Reconciles, h.Errors = rc.reconciles, rc.errors
	}
	e.sum.mu.RUnlock()
	h.P99 = e.reconcileQuantile(kind, 0.99)
	return h
}

// DeletionTimeout is how long a deletion of kind may take before it is marked Stalled (0 for
// an unknown kind).
func (e *Engine) DeletionTimeout(kind string) time.Duration {
	if k := e.kind(kind); k != nil {
		return k.deletionTimeout
	}
	return 0
}

// reconcileQuantile reads quantile q off the kind's reconcile histogram: the upper bound of
// the first bucket holding it (0 without observations; +Inf past the last bucket reads as
// the last bound).
func (e *Engine) reconcileQuantile(kind string, q float64) time.Duration {
	h, err := e.m.reconcile.GetMetricWithLabelValues(kind)
	if err != nil {
		return 0
	}
	var m dto.Metric
	if err := h.(interface{ Write(*dto.Metric) error }).Write(&m); err != nil || m.Histogram == nil {
		return 0
	}
	return time.Duration(Quantile(m.Histogram, q) * float64(time.Second))
}

// Quantile is the upper bound of the first bucket of h that holds quantile q (0 for an
// empty histogram; the last finite bound when q falls in +Inf).
func Quantile(h *dto.Histogram, q float64) float64 {
	total := h.GetSampleCount()
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	last := 0.0
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			break
		}
		last = b.GetUpperBound()
		if b.GetCumulativeCount() >= rank {
			return last
		}
	}
	return last
}
