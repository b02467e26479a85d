package simnode

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestDueHeapOrder(t *testing.T) {
	var h dueHeap
	tasks := make([]task, 100)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range tasks {
		tasks[i].index = -1
		h.schedule(&tasks[i], r.Int64N(1000))
	}
	// Move some, cancel some.
	for i := 0; i < 100; i += 7 {
		h.schedule(&tasks[i], r.Int64N(1000))
	}
	cancelled := 0
	for i := 3; i < 100; i += 11 {
		h.cancel(&tasks[i])
		h.cancel(&tasks[i]) // twice is harmless
		cancelled++
	}
	if h.popDue(-1) != nil {
		t.Fatal("a task due before every due time")
	}
	var got []int64
	for {
		tk := h.popDue(1 << 62)
		if tk == nil {
			break
		}
		if tk.index != -1 || h.queued(tk) {
			t.Fatal("a popped task still looks queued")
		}
		got = append(got, tk.due)
	}
	if len(got) != 100-cancelled || !slices.IsSorted(got) {
		t.Fatalf("popped %d tasks (want %d), sorted %v", len(got), 100-cancelled, slices.IsSorted(got))
	}
	if _, ok := h.next(); ok {
		t.Fatal("heap not empty")
	}
}

func TestDueHeapPopDueOnlyDue(t *testing.T) {
	var h dueHeap
	a, b := task{index: -1}, task{index: -1}
	h.schedule(&a, 10)
	h.schedule(&b, 20)
	if next, _ := h.next(); next != 10 {
		t.Fatalf("next %d", next)
	}
	if h.popDue(15) != &a || h.popDue(15) != nil {
		t.Fatal("popDue(15) must give a only")
	}
	h.schedule(&b, 5) // moved earlier while queued
	if h.popDue(5) != &b {
		t.Fatal("moved task not due")
	}
}

// TestHeartbeatsBehind: pod work waits only while node work is more than heartbeatLate
// overdue.
func TestHeartbeatsBehind(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name string
		due  []time.Duration // node tasks, due relative to now
		want bool
	}{
		{"no node work", nil, false},
		{"due later", []time.Duration{time.Second}, false},
		{"due now", []time.Duration{0}, false},
		{"late within the allowance", []time.Duration{-heartbeatLate / 2}, false},
		{"late beyond it", []time.Duration{-2 * heartbeatLate, time.Second}, true},
	} {
		s := &Simulator{nodeQ: newQueue(1, 1), podQ: newQueue(1, 1)}
		tasks := make([]task, len(c.due))
		for i, d := range c.due {
			tasks[i].index = -1
			s.nodeQ.heap.schedule(&tasks[i], now.Add(d).UnixNano())
		}
		if got := s.heartbeatsBehind(now); got != c.want {
			t.Errorf("%s: heartbeatsBehind = %v, want %v", c.name, got, c.want)
		}
	}
}
