package simnode

import "container/heap"

// task is one due piece of work: a pod's next transition, a node's Lease renewal or its
// status report. Each pod and node embeds its tasks, so the heap holds no allocations of
// its own and a task is queued at most once.
type task struct {
	due   int64 // Unix nanoseconds
	index int   // position in the heap; -1 when not queued
	kind  taskKind
	pod   *podState
	node  *nodeState
}

type taskKind uint8

const (
	taskPod taskKind = iota
	taskLease
	taskNodeStatus
)

// dueHeap is a min-heap of tasks by due time: the one timer of the simulator waits for
// its head.
type dueHeap []*task

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *dueHeap) Push(x any)        { t := x.(*task); t.index = len(*h); *h = append(*h, t) }
func (h *dueHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// schedule queues t at due, or moves it there when already queued.
func (h *dueHeap) schedule(t *task, due int64) {
	t.due = due
	if t.index >= 0 && t.index < len(*h) && (*h)[t.index] == t {
		heap.Fix(h, t.index)
		return
	}
	heap.Push(h, t)
}

// cancel takes t off the heap if queued.
func (h *dueHeap) cancel(t *task) {
	if t.index >= 0 && t.index < len(*h) && (*h)[t.index] == t {
		heap.Remove(h, t.index)
	}
	t.index = -1
}

// queued tells whether t waits in the heap.
func (h dueHeap) queued(t *task) bool {
	return t.index >= 0 && t.index < len(h) && h[t.index] == t
}

// popDue takes the earliest task due at or before now; nil when none is.
func (h *dueHeap) popDue(now int64) *task {
	if len(*h) == 0 || (*h)[0].due > now {
		return nil
	}
	return heap.Pop(h).(*task)
}

// next is the due time of the earliest task.
func (h dueHeap) next() (int64, bool) {
	if len(h) == 0 {
		return 0, false
	}
	return h[0].due, true
}
