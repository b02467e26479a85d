package simnode

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Simulator runs Options.Nodes simulated nodes against one API server.
type Simulator struct {
	opts  Options
	log   *slog.Logger
	table *table
	read  kubernetes.Interface // the simulator's own identity: the pod and node watches
	write kubernetes.Interface // acts as the node each request's context names
	// Two heap-driven loops: pods' transitions, and nodes' Lease renewals and status
	// reports — so that a burst of pod work never delays a heartbeat.
	podQ, nodeQ *queue
	stats       Stats
	nodeIP      uint32

	mu     sync.Mutex
	nodes  map[string]*nodeState
	order  []*nodeState
	pods   map[string]*podState // namespace/name
	shapes shapes
	rnd    *rand.Rand
	epoch  uint32
}

// queue is one heap of due tasks, drained by one loop into a bounded pool of workers
// behind a token bucket. Its heap is guarded by Simulator.mu.
type queue struct {
	heap    dueHeap
	wake    chan struct{}
	work    chan job
	limit   flowcontrol.RateLimiter
	workers int
}

func newQueue(qps float64, workers int) *queue {
	return &queue{wake: make(chan struct{}, 1), work: make(chan job, workers), workers: workers,
		limit: flowcontrol.NewTokenBucketRateLimiter(float32(qps), int(qps))}
}

func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// podState is a pod bound to a simulated node: its view and its one task.
type podState struct {
	view     *podView
	target   *podView // a transition computed at once, still to write
	task     task
	stage    int   // the pending delayed stage, -1 without
	since    int64 // when that stage started matching (Unix ns)
	attempts uint8
	inflight bool
	dirty    bool // an event came while a request was in flight
	removed  bool
	done     bool // the final DELETE succeeded: nothing to do until the next event
	epoch    uint32
}

// Stats count what the simulator did (read them with Simulator.Stats).
type Stats struct {
	PodPatches, PodDeletes, LeaseRenewals, NodeStatusReports, Errors atomic.Int64
}

// StatsSnapshot is a copy of Stats.
type StatsSnapshot struct {
	PodPatches, PodDeletes, LeaseRenewals, NodeStatusReports, Errors int64
}

// job is one request a worker makes.
type job struct {
	kind   taskKind
	node   *nodeState
	pod    *podState
	target *podView // pod: the view to write (status patch) or delete (deleteNow)
	lease  *coordinationv1.Lease
	uid    types.UID // the node's, for its Lease's owner reference
}

// New makes a simulator whose watches use cfg and whose writes impersonate each node
// (cfg's identity must be allowed to impersonate users system:node:* and the group
// system:nodes, as cluster-admin is).
func New(cfg *rest.Config, o Options, log *slog.Logger) (*Simulator, error) {
	o.Complete()
	if err := o.Validate("sim-"); err != nil {
		return nil, err
	}
	stages := o.Stages
	if stages == nil && o.StagesFile != "" {
		var err error
		if stages, err = LoadStages(o.StagesFile); err != nil {
			return nil, err
		}
	}
	if stages == nil {
		stages = DefaultStages(o.JobRunTime)
	}
	t, err := compile(stages)
	if err != nil {
		return nil, fmt.Errorf("stages: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	read, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	write, err := kubernetes.NewForConfig(nodeConfig(cfg))
	if err != nil {
		return nil, err
	}
	s := &Simulator{opts: o, log: log, table: t, read: read, write: write,
		podQ: newQueue(o.QPS, o.Workers),
		// A renewal per node every interval (500/s for 5,000 nodes at 10 s), with room; as
		// many requests in flight as the pods get, so that a slow server (a renewal waiting
		// half a second) still sees every node renew.
		nodeQ: newQueue(max(100, 2*float64(o.Nodes)/o.LeaseRenewInterval.Seconds()), max(4, o.Workers)),
		nodes: map[string]*nodeState{}, pods: map[string]*podState{}, shapes: shapes{},
		rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	nodeBase, _, _ := parseRange(o.NodeIPRange)
	podBase, _, _ := parseRange(o.PodCIDR)
	for i := 1; i <= o.Nodes; i++ {
		n := &nodeState{name: o.Prefix + strconv.Itoa(i), zone: "zone-" + strconv.Itoa((i-1)%o.Zones), ip: nodeBase + uint32(i),
			pods: podRange{base: podBase + uint32(i-1)*256, size: 256}, ownRange: true}
		n.leaseTask = task{index: -1, kind: taskLease, node: n}
		n.statusTask = task{index: -1, kind: taskNodeStatus, node: n}
		s.nodes[n.name] = n
		s.order = append(s.order, n)
	}
	return s, nil
}

// NodeNames are the simulated nodes' names, in order.
func (s *Simulator) NodeNames() []string {
	names := make([]string, len(s.order))
	for i, n := range s.order {
		names[i] = n.name
	}
	return names
}

// Stats is a snapshot of the counters.
func (s *Simulator) Stats() StatsSnapshot {
	return StatsSnapshot{PodPatches: s.stats.PodPatches.Load(), PodDeletes: s.stats.PodDeletes.Load(),
		LeaseRenewals: s.stats.LeaseRenewals.Load(), NodeStatusReports: s.stats.NodeStatusReports.Load(), Errors: s.stats.Errors.Load()}
}

// Start registers the nodes, keeps them heartbeating and moves their pods through the
// stage table until ctx ends.
func (s *Simulator) Start(ctx context.Context) error {
	if len(s.order) == 0 {
		<-ctx.Done()
		return nil
	}
	s.mu.Lock()
	now := time.Now().UnixNano()
	for _, n := range s.order {
		s.nodeQ.heap.schedule(&n.statusTask, now)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, q := range []*queue{s.podQ, s.nodeQ} {
		// A new work channel each term: dispatch closes the last term's when it ends, and
		// Start runs again when this server leads again.
		q.work = make(chan job, q.workers)
		for range q.workers {
			wg.Go(func() { s.worker(ctx, q) })
		}
	}
	wg.Go(func() { s.watchNodes(ctx) })
	wg.Go(func() { s.watchPods(ctx) })
	s.log.Info("simulated nodes starting", "nodes", len(s.order), "prefix", s.opts.Prefix)
	wg.Go(func() { s.dispatch(ctx, s.nodeQ) })
	s.dispatch(ctx, s.podQ)
	wg.Wait()
	return nil
}

func (s *Simulator) poke() {
	s.podQ.poke()
	s.nodeQ.poke()
}

// dispatch is the one loop over the heap: it hands due tasks, rate-limited, to the
// workers.
func (s *Simulator) dispatch(ctx context.Context, q *queue) {
	defer close(q.work)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		if q == s.podQ && s.heartbeatsBehind(now) {
			// Heartbeats first, as a kubelet's own client for them does not queue behind its
			// pod updates: while node work is late, no pod work is handed out, so a server
			// that cannot keep up with both lets pods wait rather than nodes go NotReady
			// (whose pods the node lifecycle controller would then mark not ready: more
			// writes for a server already behind).
			s.mu.Unlock()
			timer.Reset(heartbeatLateCheck)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			continue
		}
		t := q.heap.popDue(now.UnixNano())
		var j job
		var ok bool
		if t != nil {
			j, ok = s.prepare(t, now)
		}
		next, any := q.heap.next()
		s.mu.Unlock()
		if t != nil {
			if ok {
				if err := q.limit.Wait(ctx); err != nil {
					return
				}
				select {
				case q.work <- j:
				case <-ctx.Done():
					return
				}
			}
			continue
		}
		wait := time.Hour
		if any {
			wait = time.Until(time.Unix(0, next))
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// heartbeatLate is how late a node's Lease renewal or status report may be before pod work
// waits for it; heartbeatLateCheck how often a waiting pod loop looks again. A Lease renewed
// 5 s late is 15 s old, well inside its 40 s and the node monitor's grace period; an
// allowance of 1 s stalled pod work in waves whenever the server was briefly behind.
const (
	heartbeatLate      = 5 * time.Second
	heartbeatLateCheck = 20 * time.Millisecond
)

// heartbeatsBehind reports whether node work due more than heartbeatLate ago is still
// waiting for a worker (under s.mu).
func (s *Simulator) heartbeatsBehind(now time.Time) bool {
	due, any := s.nodeQ.heap.next()
	return any && now.UnixNano()-due > int64(heartbeatLate)
}

// prepare turns a due task into a request (under s.mu); false when there is nothing to
// send.
func (s *Simulator) prepare(t *task, now time.Time) (job, bool) {
	switch t.kind {
	case taskLease:
		n := t.node
		if n.stopped || !n.registered {
			return job{}, false
		}
		return job{kind: taskLease, node: n, lease: n.lease, uid: n.uid}, true
	case taskNodeStatus:
		if t.node.stopped {
			return job{}, false
		}
		return job{kind: taskNodeStatus, node: t.node}, true
	}
	ps := t.pod
	if ps.removed || ps.inflight {
		return job{}, false
	}
	n := s.nodes[ps.view.nodeName]
	if n == nil {
		return job{}, false
	}
	if n.stopped { // a silent node's pods stand still; look again a renewal later
		s.podQ.heap.schedule(&ps.task, now.Add(s.opts.LeaseRenewInterval).UnixNano())
		return job{}, false
	}
	target := ps.target
	if target == nil {
		if ps.stage < 0 || ps.stage >= len(s.table.stages) {
			return job{}, false
		}
		w := *ps.view
		w.apply(&s.table.stages[ps.stage].Next, now.Unix(), n.pods.allocate)
		if !w.deleteNow {
			s.table.plan(&w, now, now, s.rnd.Float64, n.pods.allocate, true)
		}
		target = &w
	}
	ps.inflight, ps.dirty, ps.target = true, false, target
	return job{kind: taskPod, node: n, pod: ps, target: target}, true
}

func (s *Simulator) worker(ctx context.Context, q *queue) {
	for j := range q.work {
		if ctx.Err() != nil {
			continue
		}
		switch j.kind {
		case taskLease:
			s.renewLease(ctx, j)
		case taskNodeStatus:
			s.reportNode(ctx, j.node)
		default:
			s.writePod(ctx, j)
		}
	}
}

// retryDelay is the back-off of the attempts-th failed request: 100 ms doubling to 30 s.
func retryDelay(attempts uint8) time.Duration {
	return min(100*time.Millisecond<<min(attempts, 9), 30*time.Second)
}

func (s *Simulator) writePod(ctx context.Context, j job) {
	v := j.target
	ctx = asNode(ctx, v.nodeName)
	var err error
	var got *corev1.Pod
	if v.deleteNow {
		zero := int64(0)
		uid := v.uid
		err = s.write.CoreV1().Pods(v.namespace).Delete(ctx, v.name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err == nil {
			s.stats.PodDeletes.Add(1)
		}
	} else {
		body, merr := json.Marshal(statusPatch{Metadata: patchMeta{UID: v.uid}, Status: v.status(ipString(j.node.ip))})
		if merr != nil {
			err = merr
		} else {
			got, err = s.write.CoreV1().Pods(v.namespace).Patch(ctx, v.name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
		}
		if err == nil {
			s.stats.PodPatches.Add(1)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := j.pod
	ps.inflight = false
	if ps.removed {
		return
	}
	switch {
	case err == nil:
		ps.attempts, ps.target = 0, nil
		if v.deleteNow {
			ps.done = true
			return
		}
		s.observeLocked(got, time.Now())
		if ps.dirty {
			s.evaluateLocked(ps, time.Now())
		}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone or replaced (UID precondition): the watch tells what comes next.
		ps.target = nil
		s.evaluateLocked(ps, time.Now())
	default:
		s.stats.Errors.Add(1)
		if ps.attempts < 255 {
			ps.attempts++
		}
		if ps.attempts == 4 || ps.attempts%32 == 0 {
			s.log.Warn("pod write failing, retrying", "pod", v.namespace+"/"+v.name, "node", v.nodeName, "attempts", ps.attempts, "err", err)
		}
		if ps.dirty { // a newer pod came meanwhile: recompute from it
			ps.target = nil
			s.evaluateLocked(ps, time.Now())
		}
		s.podQ.heap.schedule(&ps.task, time.Now().Add(retryDelay(ps.attempts)).UnixNano())
		s.poke()
	}
}

type statusPatch struct {
	Metadata patchMeta        `json:"metadata"`
	Status   corev1.PodStatus `json:"status"`
}

// patchMeta carries the UID precondition a kubelet's status patches carry.
type patchMeta struct {
	UID types.UID `json:"uid"`
}

func (s *Simulator) renewLease(ctx context.Context, j job) {
	n := j.node
	ctx = asNode(ctx, n.name)
	leases := s.write.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NowMicro()
	var got *coordinationv1.Lease
	var err error
	if j.lease == nil {
		// First the create a kubelet makes (owned by the Node registered just before);
		// a Lease already there is taken over.
		got, err = leases.Create(ctx, s.opts.leaseObject(n.name, j.uid, now), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			if got, err = leases.Get(ctx, n.name, metav1.GetOptions{}); err == nil {
				l := got.DeepCopy()
				s.renewed(l, now)
				got, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
		}
	} else {
		l := j.lease.DeepCopy()
		s.renewed(l, now)
		got, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := time.Now().Add(s.opts.LeaseRenewInterval)
	switch {
	case err != nil:
		s.stats.Errors.Add(1)
		s.log.Debug("lease renewal failed", "node", n.name, "err", err)
		n.lease = nil
		next = time.Now().Add(time.Second)
	default:
		s.stats.LeaseRenewals.Add(1)
		got.ManagedFields = nil
		n.lease = got
	}
	if !n.stopped {
		s.nodeQ.heap.schedule(&n.leaseTask, next.UnixNano())
		s.poke()
	}
}

// renewed is l held and renewed by its node at now.
func (s *Simulator) renewed(l *coordinationv1.Lease, now metav1.MicroTime) {
	holder := l.Name
	d := int32(s.opts.LeaseDuration.Seconds())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &d, &now
}

// reportNode registers the node when it is not yet, and otherwise reports its status (the
// kubelet's nodeStatusReportFrequency).
func (s *Simulator) reportNode(ctx context.Context, n *nodeState) {
	ctx = asNode(ctx, n.name)
	s.mu.Lock()
	registered := n.registered
	s.mu.Unlock()
	now := metav1.Now()
	var err error
	if registered {
		_, err = s.write.CoreV1().Nodes().PatchStatus(ctx, n.name, heartbeatPatch(now))
		registered = !apierrors.IsNotFound(err) // deleted: register again, as a kubelet does
	}
	if !registered {
		err = s.register(ctx, n, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.stats.Errors.Add(1)
		s.log.Warn("node status failed", "node", n.name, "err", err)
		if !n.stopped {
			s.nodeQ.heap.schedule(&n.statusTask, time.Now().Add(2*time.Second).UnixNano())
			s.poke()
		}
		return
	}
	s.stats.NodeStatusReports.Add(1)
	period := s.opts.StatusReport
	first := !n.registered
	if first {
		n.registered = true
		// Spread the reports over the period.
		period = time.Duration(float64(period) * (0.5 + 0.5*s.rnd.Float64()))
	}
	if !n.stopped {
		s.nodeQ.heap.schedule(&n.statusTask, time.Now().Add(period).UnixNano())
	}
	s.poke()
	if first {
		// The Lease right after registering, as a kubelet, not behind the other nodes'
		// registrations in the heap; renewLease schedules the next renewal.
		j := job{kind: taskLease, node: n, lease: n.lease, uid: n.uid}
		s.mu.Unlock()
		s.renewLease(ctx, j)
		s.mu.Lock()
	}
}

// register creates the node's Node (as the node: NodeRestriction lets it create only
// itself) and then writes its whole status, as a kubelet's first status update does (a
// create need not keep the status it carries).
func (s *Simulator) register(ctx context.Context, n *nodeState, now metav1.Time) error {
	node := s.opts.nodeObject(n, now)
	created, err := s.write.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
	body, err := json.Marshal(map[string]any{"status": node.Status})
	if err != nil {
		return err
	}
	patched, err := s.write.CoreV1().Nodes().PatchStatus(ctx, n.name, body)
	if err != nil {
		return fmt.Errorf("node %s status: %w", n.name, err)
	}
	if created == nil || created.UID == "" {
		created = patched
	}
	s.mu.Lock()
	n.uid = created.UID
	s.mu.Unlock()
	return nil
}
