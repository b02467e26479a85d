package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/clock"
)

// Queue timings, upstream's defaults (pkg/scheduler/backend/queue).
const (
	initialBackoff         = 1 * time.Second
	maxBackoff             = 10 * time.Second
	maxInUnschedulable     = 5 * time.Minute
	backoffFlushInterval   = 1 * time.Second
	unschedulableFlushTick = 30 * time.Second
)

type where uint8

const (
	inActive where = iota + 1
	inBackoff
	inUnschedulable
	inGated // a PreEnqueue plugin refused it (GatingPlugin is set)
)

// queueHooks are one profile's plugins the queue consults: PreEnqueue (scheduling gates)
// before a pod may be popped, and the cluster events each plugin said could make a pod it
// rejected schedulable (EnqueueExtensions, with their queueing hints).
type queueHooks struct {
	preEnqueue []fwk.PreEnqueuePlugin
	events     map[string][]fwk.ClusterEventWithHint
}

// queue is the scheduling queue: activeQ (ordered by the profile's QueueSort: priority,
// then time), backoffQ (pods that failed wait initialBackoff doubling to maxBackoff) and the
// unschedulable pods, which go back on the cluster events that could make them fit, or
// after maxInUnschedulable. It is also the framework's PodNominator and PodActivator.
type queue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	clock    clock.WithTicker
	active   *podHeap
	backoff  *podHeap
	unsched  map[types.UID]*framework.QueuedPodInfo
	gated    map[types.UID]*framework.QueuedPodInfo
	loc      map[types.UID]where
	inFlight sets.Set[types.UID]
	hooks    map[string]*queueHooks // by schedulerName
	// cycle counts pops; moveCycle is the cycle of the last move request, so a pod that
	// failed while an event that may help it happened goes to backoff, not unschedulable.
	cycle, moveCycle int64
	closed           bool
	metrics          *metrics

	nominator
}

var (
	_ fwk.PodNominator = (*queue)(nil)
	_ fwk.PodActivator = (*queue)(nil)
)

func newQueue(less fwk.LessFunc, hooks map[string]*queueHooks, clk clock.WithTicker, m *metrics) *queue {
	q := &queue{clock: clk, hooks: hooks, metrics: m,
		active:   &podHeap{less: func(a, b *framework.QueuedPodInfo) bool { return less(a, b) }},
		backoff:  &podHeap{less: func(a, b *framework.QueuedPodInfo) bool { return a.BackoffExpiration.Before(b.BackoffExpiration) }},
		unsched:  map[types.UID]*framework.QueuedPodInfo{},
		gated:    map[types.UID]*framework.QueuedPodInfo{},
		loc:      map[types.UID]where{},
		inFlight: sets.New[types.UID](),
	}
	q.cond = sync.NewCond(&q.mu)
	q.nominator.init()
	return q
}

// run flushes backoffQ each second and long-unschedulable pods every 30 s until ctx ends,
// then wakes any Pop.
func (q *queue) run(ctx context.Context) {
	bt := q.clock.NewTicker(backoffFlushInterval)
	ut := q.clock.NewTicker(unschedulableFlushTick)
	defer bt.Stop()
	defer ut.Stop()
	for {
		select {
		case <-ctx.Done():
			q.mu.Lock()
			q.closed = true
			q.cond.Broadcast()
			q.mu.Unlock()
			return
		case <-bt.C():
			q.flushBackoff()
		case <-ut.C():
			q.flushUnschedulable()
		}
	}
}

// add queues a new unscheduled pod (or refreshes one already queued).
func (q *queue) add(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.loc[pod.UID]; ok {
		q.updateLocked(pod)
		return
	}
	pi, _ := framework.NewPodInfo(pod)
	now := q.clock.Now()
	qp := &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: now}}
	q.enqueueLocked(qp)
}

// enqueueLocked runs the PreEnqueue plugins: a gated pod waits with the unschedulable
// ones, the others go to activeQ.
func (q *queue) enqueueLocked(qp *framework.QueuedPodInfo) {
	if gate := q.gateLocked(qp); gate != "" {
		qp.GatingPlugin = gate
		q.gated[qp.Pod.UID] = qp
		q.loc[qp.Pod.UID] = inGated
	} else {
		qp.GatingPlugin = ""
		heap.Push(q.active, qp)
		q.loc[qp.Pod.UID] = inActive
		q.cond.Broadcast()
	}
	q.recordLocked()
}

func (q *queue) gateLocked(qp *framework.QueuedPodInfo) string {
	h := q.hooks[qp.Pod.Spec.SchedulerName]
	if h == nil {
		return ""
	}
	for _, p := range h.preEnqueue {
		if s := p.PreEnqueue(context.Background(), qp.Pod); !s.IsSuccess() {
			return p.Name()
		}
	}
	return ""
}

// update refreshes a queued pod; an unschedulable pod whose spec changed is tried again.
func (q *queue) update(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.loc[pod.UID]; !ok {
		if q.inFlight.Has(pod.UID) {
			return // being scheduled; the failure path reads the newest pod from the informer
		}
		pi, _ := framework.NewPodInfo(pod)
		q.enqueueLocked(&framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: q.clock.Now()}})
		return
	}
	q.updateLocked(pod)
}

func (q *queue) updateLocked(pod *v1.Pod) {
	switch q.loc[pod.UID] {
	case inActive:
		if i := q.active.find(pod.UID); i >= 0 {
			_, _ = q.active.items[i].Update(pod)
			heap.Fix(q.active, i)
		}
	case inBackoff:
		if i := q.backoff.find(pod.UID); i >= 0 {
			_, _ = q.backoff.items[i].Update(pod)
		}
	case inGated:
		qp := q.gated[pod.UID]
		_, _ = qp.Update(pod)
		delete(q.gated, pod.UID)
		delete(q.loc, pod.UID)
		q.enqueueLocked(qp)
	case inUnschedulable:
		qp := q.unsched[pod.UID]
		old := qp.Pod
		_, _ = qp.Update(pod)
		if specChanged(old, pod) {
			delete(q.unsched, pod.UID)
			delete(q.loc, pod.UID)
			q.requeueLocked(qp)
		}
	}
}

// specChanged: what a user changes to make a pod fit (upstream's isPodUpdated ignores
// status, resourceVersion and generation alike).
func specChanged(old, new *v1.Pod) bool {
	strip := func(p *v1.Pod) *v1.Pod {
		c := p.DeepCopy()
		c.ResourceVersion, c.Generation, c.ManagedFields = "", 0, nil
		c.Status = v1.PodStatus{}
		return c
	}
	return !equalPods(strip(old), strip(new))
}

func (q *queue) delete(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(pod.UID)
	q.nominator.delete(pod)
	q.recordLocked()
}

func (q *queue) removeLocked(uid types.UID) {
	switch q.loc[uid] {
	case inActive:
		if i := q.active.find(uid); i >= 0 {
			heap.Remove(q.active, i)
		}
	case inBackoff:
		if i := q.backoff.find(uid); i >= 0 {
			heap.Remove(q.backoff, i)
		}
	case inUnschedulable:
		delete(q.unsched, uid)
	case inGated:
		delete(q.gated, uid)
	}
	delete(q.loc, uid)
}

// pop blocks until a pod is active (or the queue closed: nil) and hands it to a
// scheduling cycle; done must follow.
func (q *queue) pop() (*framework.QueuedPodInfo, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, 0
	}
	qp := heap.Pop(q.active).(*framework.QueuedPodInfo)
	delete(q.loc, qp.Pod.UID)
	q.inFlight.Insert(qp.Pod.UID)
	q.cycle++
	qp.Attempts++
	if qp.InitialAttemptTimestamp == nil {
		t := q.clock.Now()
		qp.InitialAttemptTimestamp = &t
	}
	q.recordLocked()
	return qp, q.cycle
}

func (q *queue) done(uid types.UID) {
	q.mu.Lock()
	q.inFlight.Delete(uid)
	q.mu.Unlock()
}

func (q *queue) backoffDuration(qp *framework.QueuedPodInfo) time.Duration {
	d := initialBackoff
	for i := 1; i < qp.Attempts && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// addUnschedulable takes back a pod its cycle (number podCycle) could not place. An error
// (not a rejection) and a pod some event may have helped meanwhile wait in backoffQ; the
// others wait for an event with the unschedulable pods.
func (q *queue) addUnschedulable(qp *framework.QueuedPodInfo, podCycle int64, isError bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inFlight.Delete(qp.Pod.UID)
	if _, ok := q.loc[qp.Pod.UID]; ok {
		return
	}
	now := q.clock.Now()
	qp.Timestamp = now
	qp.BackoffExpiration = now.Add(q.backoffDuration(qp))
	if isError || q.moveCycle >= podCycle {
		heap.Push(q.backoff, qp)
		q.loc[qp.Pod.UID] = inBackoff
	} else {
		qp.UnschedulableCount++
		q.unsched[qp.Pod.UID] = qp
		q.loc[qp.Pod.UID] = inUnschedulable
	}
	q.recordLocked()
}

// requeueLocked sends a pod leaving the unschedulable pods to backoffQ while its backoff
// lasts, else to activeQ.
func (q *queue) requeueLocked(qp *framework.QueuedPodInfo) {
	if q.clock.Now().Before(qp.BackoffExpiration) {
		heap.Push(q.backoff, qp)
		q.loc[qp.Pod.UID] = inBackoff
	} else {
		heap.Push(q.active, qp)
		q.loc[qp.Pod.UID] = inActive
		q.cond.Broadcast()
	}
	q.recordLocked()
}

// moveOnEvent moves the unschedulable pods that event could make schedulable: those a
// plugin rejected that registered the event (and whose queueing hint, if any, says Queue),
// and those no plugin rejected.
func (q *queue) moveOnEvent(event fwk.ClusterEvent, oldObj, newObj any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveCycle = q.cycle
	for uid, qp := range q.unsched {
		if !q.helps(qp, event, oldObj, newObj) {
			continue
		}
		delete(q.unsched, uid)
		delete(q.loc, uid)
		q.requeueLocked(qp)
	}
}

func (q *queue) helps(qp *framework.QueuedPodInfo, event fwk.ClusterEvent, oldObj, newObj any) bool {
	rejectors := qp.UnschedulablePlugins.Union(qp.PendingPlugins)
	if rejectors.Len() == 0 {
		return true
	}
	h := q.hooks[qp.Pod.Spec.SchedulerName]
	if h == nil {
		return true
	}
	for plugin := range rejectors {
		for _, reg := range h.events[plugin] {
			if !framework.MatchClusterEvents(reg.Event, event) {
				continue
			}
			if reg.QueueingHintFn == nil {
				return true
			}
			hint, err := reg.QueueingHintFn(klog.Background(), qp.Pod, oldObj, newObj)
			if err != nil || hint == fwk.Queue {
				return true
			}
		}
	}
	return false
}

func (q *queue) flushBackoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	moved := false
	for q.backoff.Len() > 0 && !q.backoff.items[0].BackoffExpiration.After(now) {
		qp := heap.Pop(q.backoff).(*framework.QueuedPodInfo)
		heap.Push(q.active, qp)
		q.loc[qp.Pod.UID] = inActive
		moved = true
	}
	if moved {
		q.cond.Broadcast()
		q.recordLocked()
	}
}

func (q *queue) flushUnschedulable() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for uid, qp := range q.unsched {
		if now.Sub(qp.Timestamp) <= maxInUnschedulable {
			continue
		}
		delete(q.unsched, uid)
		delete(q.loc, uid)
		qp.WasFlushedFromUnschedulable = true
		q.requeueLocked(qp)
	}
}

// Activate moves pods (a plugin asked for them) to activeQ at once.
func (q *queue) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range pods {
		var qp *framework.QueuedPodInfo
		switch q.loc[p.UID] {
		case inBackoff:
			if i := q.backoff.find(p.UID); i >= 0 {
				qp = heap.Remove(q.backoff, i).(*framework.QueuedPodInfo)
			}
		case inUnschedulable:
			qp = q.unsched[p.UID]
			delete(q.unsched, p.UID)
		}
		if qp != nil {
			heap.Push(q.active, qp)
			q.loc[p.UID] = inActive
			q.cond.Broadcast()
		}
	}
	q.recordLocked()
}

// sizes: activeQ, backoffQ, unschedulable, gated.
func (q *queue) sizesLocked() (active, backoff, unsched, gated int) {
	return q.active.Len(), q.backoff.Len(), len(q.unsched), len(q.gated)
}

func (q *queue) recordLocked() {
	if q.metrics == nil {
		return
	}
	a, b, u, g := q.sizesLocked()
	q.metrics.pending(a, b, u, g)
}

// podHeap is a binary heap of queued pods.
type podHeap struct {
	items []*framework.QueuedPodInfo
	pos   map[types.UID]int
	less  func(a, b *framework.QueuedPodInfo) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i].Pod.UID], h.pos[h.items[j].Pod.UID] = i, j
}
func (h *podHeap) Push(x any) {
	qp := x.(*framework.QueuedPodInfo)
	if h.pos == nil {
		h.pos = map[types.UID]int{}
	}
	h.pos[qp.Pod.UID] = len(h.items)
	h.items = append(h.items, qp)
}
func (h *podHeap) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	delete(h.pos, x.Pod.UID)
	return x
}

func (h *podHeap) find(uid types.UID) int {
	if i, ok := h.pos[uid]; ok {
		return i
	}
	return -1
}
