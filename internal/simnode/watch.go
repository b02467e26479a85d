package simnode

import (
	"context"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// sink is a reflector's store that keeps nothing: every object goes to the simulator,
// which keeps only its small view of it.
type sink struct {
	upsert  func(obj any)
	remove  func(obj any)
	replace func(objs []any)
}

func (k sink) Add(obj any) error               { k.upsert(obj); return nil }
func (k sink) Update(obj any) error            { k.upsert(obj); return nil }
func (k sink) Delete(obj any) error            { k.remove(obj); return nil }
func (k sink) Replace(l []any, _ string) error { k.replace(l); return nil }
func (k sink) Resync() error                   { return nil }

var _ cache.ReflectorStore = sink{}

// listPageSize is how many pods one page of the pod list holds: the simulator never
// holds more pod objects than a page (or a watch event) at once.
const listPageSize = 500

// watchPods is the one pod watch of all simulated nodes: every bound pod (a field
// selector cannot OR node names), those of other nodes dropped at once. It is not a
// reflector: a reflector gathers the whole list before its store sees it (100,000 pods
// decoded at once); here each page of a paginated, consistent list is taken in and
// dropped, then the watch continues from the list's resourceVersion, and a watch that
// expired (410 Gone) lists again.
func (s *Simulator) watchPods(ctx context.Context) {
	sel := fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	pods := s.read.CoreV1().Pods(metav1.NamespaceAll)
	backoff := time.Second
	for ctx.Err() == nil {
		rv, err := s.listPods(ctx, pods, sel)
		if err != nil {
			s.log.Warn("pod list failed", "err", err)
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		s.followPods(ctx, pods, sel, rv)
	}
}

// listPods lists every bound pod page by page into the simulator and forgets the pods it
// knew that the list no longer has; it returns the list's resourceVersion.
func (s *Simulator) listPods(ctx context.Context, pods podClient, sel string) (string, error) {
	s.mu.Lock()
	s.epoch++
	s.mu.Unlock()
	opts := metav1.ListOptions{FieldSelector: sel, Limit: listPageSize}
	rv := ""
	for {
		l, err := pods.List(ctx, opts)
		if err != nil {
			return "", err
		}
		if rv == "" {
			rv = l.ResourceVersion
		}
		s.mu.Lock()
		now := time.Now()
		for i := range l.Items {
			s.observeLocked(&l.Items[i], now)
		}
		s.mu.Unlock()
		s.poke()
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	s.mu.Lock()
	for k, ps := range s.pods {
		if ps.epoch != s.epoch {
			s.forgetLocked(k, ps.view.uid)
		}
	}
	s.mu.Unlock()
	// The pages are garbage now: give their memory back rather than keep it as heap.
	debug.FreeOSMemory()
	return rv, nil
}

// followPods watches from rv until the watch must start over from a list (410 Gone) or
// ctx ends; a watch that merely closed is started again from the last resourceVersion.
func (s *Simulator) followPods(ctx context.Context, pods podClient, sel, rv string) {
	for ctx.Err() == nil {
		// As a reflector: the server ends each watch after 5–10 minutes, so a watch that
		// stopped delivering without closing (a server's stuck stream, a half-open
		// connection) cannot hold the simulator's view still for longer.
		timeout := int64(300 + rand.IntN(300))
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return
			}
			s.log.Warn("pod watch failed", "err", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Error:
				w.Stop()
				if st := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
					return
				}
				s.log.Warn("pod watch error", "err", apierrors.FromObject(ev.Object))
				continue
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			s.mu.Lock()
			if ev.Type == watch.Deleted {
				s.forgetLocked(p.Namespace+"/"+p.Name, p.UID)
			} else {
				s.observeLocked(p, time.Now())
			}
			s.mu.Unlock()
			s.poke()
		}
		w.Stop()
	}
}

type podClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// watchNodes follows the simulated Nodes: a HeartbeatAnnotation stops or resumes a node,
// spec.podCIDR (the node IPAM controller's) becomes its pod range, a deleted Node
// registers again.
func (s *Simulator) watchNodes(ctx context.Context) {
	sel := TypeLabel + "=" + TypeValue
	nodes := s.read.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return nodes.Watch(ctx, o)
		},
	}
	upsert := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		n := s.nodes[node.Name]
		if n == nil {
			return
		}
		if cidr := node.Spec.PodCIDR; cidr != "" && n.ownRange {
			if r, err := newPodRange(cidr); err == nil {
				n.pods, n.ownRange = r, false
			} else {
				s.log.Warn("node podCIDR unusable, keeping the simulator's range", "node", n.name, "podCIDR", cidr, "err", err)
			}
		}
		stopped := node.Annotations[HeartbeatAnnotation] == "stopped"
		if stopped == n.stopped {
			if !stopped && n.registered && !nodeReady(node) {
				// Someone else (the node lifecycle controller) wrote Ready False or
				// Unknown: a live kubelet's next status update (10 s) says Ready again.
				s.nodeQ.heap.schedule(&n.statusTask, time.Now().UnixNano())
				s.poke()
			}
			return
		}
		n.stopped = stopped
		if stopped {
			s.log.Info("simulated node stops heartbeating", "node", n.name)
			s.nodeQ.heap.cancel(&n.leaseTask)
			s.nodeQ.heap.cancel(&n.statusTask)
			return
		}
		s.log.Info("simulated node heartbeats again", "node", n.name)
		now := time.Now().UnixNano()
		s.nodeQ.heap.schedule(&n.statusTask, now)
		if n.registered {
			s.nodeQ.heap.schedule(&n.leaseTask, now)
		}
		s.poke()
	}
	r := cache.NewReflectorWithOptions(lw, &corev1.Node{}, sink{
		upsert: upsert,
		remove: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			node, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if n := s.nodes[node.Name]; n != nil && n.registered && !n.stopped {
				n.registered, n.lease = false, nil
				s.nodeQ.heap.schedule(&n.statusTask, time.Now().UnixNano())
				s.poke()
			}
		},
		replace: func(objs []any) {
			for _, o := range objs {
				upsert(o)
			}
		},
	}, cache.ReflectorOptions{Name: "simnode-nodes"})
	r.RunWithContext(ctx)
}

// observeLocked takes in a pod as the watch (or a write's response) shows it.
func (s *Simulator) observeLocked(p *corev1.Pod, now time.Time) {
	key := p.Namespace + "/" + p.Name
	ps := s.pods[key]
	n := s.nodes[p.Spec.NodeName]
	if n == nil {
		if ps != nil {
			s.forgetLocked(key, ps.view.uid)
		}
		return
	}
	if ps != nil && ps.view.uid != p.UID {
		s.forgetLocked(key, ps.view.uid)
		ps = nil
	}
	rv, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
	if ps != nil {
		ps.epoch = s.epoch
		if rv != 0 && rv <= ps.view.rv { // older than what a write's response showed
			return
		}
	}
	v := viewOf(p, s.table, s.shapes)
	if v.ip != 0 && n.pods.contains(v.ip) {
		n.pods.take(v.ip)
	}
	if ps == nil {
		ps = &podState{stage: -1, epoch: s.epoch}
		ps.task = task{index: -1, kind: taskPod, pod: ps}
		s.pods[key] = ps
	}
	ps.view, ps.done = v, false
	if ps.inflight {
		ps.dirty = true
		return
	}
	s.evaluateLocked(ps, now)
}

// evaluateLocked plans ps's next transition from its view: a write due now when
// zero-delay stages apply, else the next delayed stage at its time.
func (s *Simulator) evaluateLocked(ps *podState, now time.Time) {
	if ps.inflight || ps.removed || ps.done {
		return
	}
	n := s.nodes[ps.view.nodeName]
	w := *ps.view
	since := now
	if first := s.table.match(&w); first >= 0 && first == ps.stage && ps.since != 0 {
		since = time.Unix(0, ps.since)
	}
	changed, stage, due := s.table.plan(&w, now, since, s.rnd.Float64, n.pods.allocate, false)
	switch {
	case changed:
		ps.target, ps.stage, ps.since = &w, -1, 0
		s.podQ.heap.schedule(&ps.task, now.UnixNano())
	case stage >= 0:
		if w.ip != ps.view.ip && w.ip != 0 { // an address planned but not written
			n.pods.release(w.ip)
		}
		if stage != ps.stage {
			ps.stage, ps.since = stage, since.UnixNano()
		}
		ps.target = nil
		s.podQ.heap.schedule(&ps.task, due.UnixNano())
	default:
		ps.target, ps.stage, ps.since = nil, -1, 0
		s.podQ.heap.cancel(&ps.task)
	}
}

// forgetLocked drops a pod that is gone (or no longer on a simulated node).
func (s *Simulator) forgetLocked(key string, uid types.UID) {
	ps := s.pods[key]
	if ps == nil || ps.view.uid != uid {
		return
	}
	s.podQ.heap.cancel(&ps.task)
	ps.removed = true
	if n := s.nodes[ps.view.nodeName]; n != nil {
		n.pods.release(ps.view.ip)
		if ps.target != nil {
			n.pods.release(ps.target.ip)
		}
	}
	delete(s.pods, key)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
