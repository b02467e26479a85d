package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// Upstream's bounds on how many feasible nodes a cycle looks for (schedule_one.go).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// numFeasibleNodesToFind is upstream's adaptive percentageOfNodesToScore: all nodes below
// 100; else the profile's or the global percentage, 0 meaning 50% − 1% per 125 nodes, at
// least 5%; never fewer than 100.
func numFeasibleNodesToFind(profile, global *int32, numAll int32) int32 {
	if numAll < minFeasibleNodesToFind {
		return numAll
	}
	var percentage int32
	switch {
	case profile != nil:
		percentage = *profile
	case global != nil:
		percentage = *global
	}
	if percentage == 0 {
		percentage = max(int32(50)-numAll/125, minFeasibleNodesPercentageToFind)
	}
	return max(numAll*percentage/100, minFeasibleNodesToFind)
}

// result is what one scheduling algorithm run decided.
type result struct {
	host       string
	nominating *fwk.NominatingInfo
}

var clearNomination = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}

// scheduleOne runs one scheduling cycle: pop the next pod, filter and score the nodes of
// the snapshot, assume the pod on the chosen node and reserve, then bind in a goroutine so
// the next cycle starts at once.
func (r *run) scheduleOne(ctx context.Context) {
	qp, cycle := r.queue.pop()
	if qp == nil {
		return
	}
	pod := qp.Pod
	f, ok := r.profiles[pod.Spec.SchedulerName]
	if !ok || pod.DeletionTimestamp != nil || r.cache.isAssumed(pod.UID) {
		r.queue.done(pod.UID)
		return
	}
	start := r.clock.Now()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("scheduling cycle panicked", "pod", pod.Namespace+"/"+pod.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.fail(ctx, f, qp, cycle, fwk.AsStatus(fmt.Errorf("scheduling cycle panicked: %v", p)), clearNomination, start)
		}
	}()

	r.cache.updateSnapshot(r.snap)
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(false)
	toActivate := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, toActivate)

	res, status := r.algorithm(ctx, f, state, qp)
	if !status.IsSuccess() {
		r.fail(ctx, f, qp, cycle, status, res.nominating, start)
		return
	}

	assumed := qp.DeepCopy()
	assumed.Pod.Spec.NodeName = res.host
	if err := r.cache.assume(assumed.Pod); err != nil {
		r.fail(ctx, f, qp, cycle, fwk.AsStatus(err), clearNomination, start)
		return
	}
	r.queue.DeleteNominatedPodIfExists(assumed.Pod)
	if s := f.RunReservePluginsReserve(ctx, state, assumed.Pod, res.host); !s.IsSuccess() {
		r.unreserve(ctx, f, state, assumed, res.host)
		r.fail(ctx, f, qp, cycle, rejectedOn(pod, res.host, s), clearNomination, start)
		return
	}
	wait, s := f.RunPermitPlugins(ctx, state, assumed.Pod, res.host)
	switch {
	case s.IsWait():
		f.AddWaitingPod(assumed.Pod, wait)
	case !s.IsSuccess():
		r.unreserve(ctx, f, state, assumed, res.host)
		r.fail(ctx, f, qp, cycle, rejectedOn(pod, res.host, s), clearNomination, start)
		return
	}
	if len(toActivate.Map) > 0 {
		r.queue.Activate(klog.FromContext(ctx), toActivate.Map)
		toActivate.Map = map[string]*v1.Pod{}
	}
	r.binds.Go(func() { r.bindingCycle(ctx, f, state, assumed, res.host, cycle, start, toActivate) })
}

// rejectedOn turns a Reserve/Permit rejection into upstream's one-node FitError.
func rejectedOn(pod *v1.Pod, node string, s *fwk.Status) *fwk.Status {
	if !s.IsRejected() {
		return s
	}
	fe := &framework.FitError{NumAllNodes: 1, Pod: pod, Diagnosis: framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}}
	fe.Diagnosis.NodeToStatus.Set(node, s)
	fe.Diagnosis.AddPluginStatus(s)
	return fwk.NewStatus(s.Code()).WithError(fe)
}

func (r *run) unreserve(ctx context.Context, f framework.Framework, state fwk.CycleState, assumed *framework.QueuedPodInfo, host string) {
	f.RunReservePluginsUnreserve(ctx, state, assumed.Pod, host)
	r.cache.forget(assumed.Pod)
}

// algorithm filters and scores; a pod that fits nowhere gets the PostFilter plugins
// (preemption) and a FitError.
func (r *run) algorithm(ctx context.Context, f framework.Framework, state fwk.CycleState, qp *framework.QueuedPodInfo) (result, *fwk.Status) {
	pod := qp.Pod
	all := r.snap.list
	if len(all) == 0 {
		return result{nominating: clearNomination}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable).WithError(errNoNodes)
	}
	feasible, pos, cached, diagnosis, err := r.findFeasible(ctx, f, state, pod, all)
	if err != nil {
		return result{nominating: clearNomination}, fwk.AsStatus(err)
	}
	if len(feasible) == 0 {
		fe := &framework.FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: diagnosis}
		if !f.HasPostFilterPlugins() {
			return result{nominating: clearNomination}, fwk.NewStatus(fwk.Unschedulable).WithError(fe)
		}
		pf, s := f.RunPostFilterPlugins(ctx, state, pod, fe.Diagnosis.NodeToStatus)
		fe.Diagnosis.PostFilterMsg = s.Message()
		if s.Code() == fwk.Error {
			r.log.Error("preemption failed", "pod", pod.Namespace+"/"+pod.Name, "err", s.Message())
		}
		var ni *fwk.NominatingInfo
		if pf != nil {
			ni = pf.NominatingInfo
		}
		return result{nominating: ni}, fwk.NewStatus(fwk.Unschedulable).WithError(fe)
	}
	if len(feasible) == 1 {
		return result{host: feasible[0].Node().Name}, nil
	}
	if s := f.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
		return result{nominating: clearNomination}, fwk.AsStatus(s.AsError())
	}
	var scores []fwk.NodePluginScores
	var s *fwk.Status
	if cached && r.equiv.beginScore(f, state) {
		scores, s = r.equiv.score(ctx, f, state, pod, feasible, pos)
	} else {
		scores, s = f.RunScorePlugins(ctx, state, pod, feasible)
	}
	if !s.IsSuccess() {
		return result{nominating: clearNomination}, fwk.AsStatus(s.AsError())
	}
	return result{host: framework.NewSortedScoredNodes(scores).Pop().Name}, nil
}

// findFeasible runs PreFilter, tries a nominated node first, then filters nodes in
// parallel from where the last cycle stopped until enough are feasible. When all nodes are
// candidates and the equivalence cache applies to the pod (cached), pos are the feasible
// nodes' positions in the snapshot's list.
func (r *run) findFeasible(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, all []fwk.NodeInfo) (feasible []fwk.NodeInfo, pos []int, cached bool, diagnosis framework.Diagnosis, err error) {
	diagnosis = framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	sig := r.equiv.beginPreFilter(f, pod)
	pre, s, unsched := f.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unsched
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return nil, nil, false, diagnosis, s.AsError()
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
		return nil, nil, false, diagnosis, nil
	}
	if nnn := pod.Status.NominatedNodeName; nnn != "" {
		if n, err := r.snap.Get(nnn); err == nil {
			feasible, _, err := r.filter(ctx, f, state, pod, &diagnosis, []fwk.NodeInfo{n}, false, false)
			if err != nil {
				return nil, nil, false, diagnosis, err
			}
			if len(feasible) > 0 {
				return feasible, nil, false, diagnosis, nil
			}
		}
	}
	nodes := all
	if !pre.AllNodes() {
		nodes = make([]fwk.NodeInfo, 0, len(pre.NodeNames))
		for name := range pre.NodeNames {
			if n, err := r.snap.Get(name); err == nil {
				nodes = append(nodes, n)
			}
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unsched))))
	} else {
		cached = r.equiv.beginFilter(f, state, sig, r.snap.version, len(all))
	}
	feasible, pos, err = r.filter(ctx, f, state, pod, &diagnosis, nodes, true, cached)
	return feasible, pos, cached, diagnosis, err
}

// filter runs the Filter plugins (with nominated pods) on nodes from where the last cycle
// stopped (rotate) until upstream's number of feasible nodes is found. cached: nodes is the
// snapshot's list and the equivalence cache answers for the nodes it knows; pos are then
// the feasible nodes' positions.
func (r *run) filter(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, diagnosis *framework.Diagnosis, nodes []fwk.NodeInfo, rotate, cached bool) ([]fwk.NodeInfo, []int, error) {
	n := len(nodes)
	if n == 0 {
		return nil, nil, nil
	}
	want := numFeasibleNodesToFind(f.PercentageOfNodesToScore(), r.percentage, int32(n))
	if !f.HasScorePlugins() {
		want = 1
	}
	startAt := 0
	if rotate {
		startAt = r.nextStart % n
	}
	feasible := make([]fwk.NodeInfo, want)
	var feasiblePos []int
	if cached {
		feasiblePos = make([]int, want)
	}
	// One slice of n for every cycle (5,000 pointers to clear and scan per pod otherwise);
	// only this loop's goroutine filters.
	if cap(r.statusBuf) < n {
		r.statusBuf = make([]*fwk.Status, n)
	}
	statuses := r.statusBuf[:n]
	defer clear(statuses)
	var found atomic.Int32
	var firstErr atomic.Pointer[error]
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	check := func(i int) {
		p := (startAt + i) % n
		ni := nodes[p]
		var s *fwk.Status
		if cached {
			s = r.equiv.filter(fctx, f, state, pod, p, ni, r.queue)
		} else {
			s = f.RunFilterPluginsWithNominatedPods(fctx, state, pod, ni)
		}
		switch {
		case s.Code() == fwk.Error:
			err := s.AsError()
			firstErr.CompareAndSwap(nil, &err)
			cancel()
		case s.IsSuccess():
			if k := found.Add(1); k > want {
				found.Add(-1)
				cancel()
			} else {
				feasible[k-1] = ni
				if cached {
					feasiblePos[k-1] = p
				}
			}
		default:
			statuses[i] = s
		}
	}
	f.Parallelizer().Until(fctx, n, check, "Filter")
	feasible = feasible[:found.Load()]
	if cached {
		feasiblePos = feasiblePos[:len(feasible)]
	}
	// The diagnosis is read only when no node is feasible (FitError, preemption); a
	// cycle that found nodes does not build it (a map entry per rejected node).
	processed := len(feasible)
	for i, s := range statuses {
		if s != nil {
			if len(feasible) == 0 {
				diagnosis.NodeToStatus.Set(nodes[(startAt+i)%n].Node().Name, s)
				diagnosis.AddPluginStatus(s)
			}
			processed++
		}
	}
	if rotate {
		r.nextStart = (startAt + processed) % n
	}
	if e := firstErr.Load(); e != nil {
		return nil, nil, *e
	}
	return feasible, feasiblePos, nil
}

// bindingCycle waits for Permit, runs PreBind and Bind (pods/binding through
// DefaultBinder), and on failure takes the assumption back and requeues the pod.
func (r *run) bindingCycle(ctx context.Context, f framework.Framework, state fwk.CycleState, assumed *framework.QueuedPodInfo, host string, cycle int64, start time.Time, toActivate *framework.PodsToActivate) {
	pod := assumed.Pod
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("binding cycle panicked", "pod", pod.Namespace+"/"+pod.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.bindFailed(ctx, f, state, assumed, host, cycle, fwk.AsStatus(fmt.Errorf("binding cycle panicked: %v", p)), start)
		}
	}()
	status := f.WaitOnPermit(ctx, pod)
	if !status.IsSuccess() {
		r.bindFailed(ctx, f, state, assumed, host, cycle, rejectedOn(pod, host, status), start)
		return
	}
	r.queue.done(pod.UID)
	select {
	case r.bindSlots <- struct{}{}:
		defer func() { <-r.bindSlots }()
	case <-ctx.Done():
		r.bindFailed(ctx, f, state, assumed, host, cycle, fwk.AsStatus(ctx.Err()), start)
		return
	}
	if s := f.RunPreBindPlugins(ctx, state, pod, host); !s.IsSuccess() {
		r.bindFailed(ctx, f, state, assumed, host, cycle, s, start)
		return
	}
	if s := r.bind(ctx, f, state, pod, host); !s.IsSuccess() {
		r.bindFailed(ctx, f, state, assumed, host, cycle, s, start)
		return
	}
	now := r.clock.Now()
	r.s.metrics.attempt(resultScheduled, f.ProfileName(), now.Sub(start).Seconds())
	if assumed.InitialAttemptTimestamp != nil {
		r.s.metrics.scheduled(assumed.Attempts, now.Sub(*assumed.InitialAttemptTimestamp).Seconds())
	}
	f.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, host)
	f.RunPostBindPlugins(ctx, state, pod, host)
	if len(toActivate.Map) > 0 {
		r.queue.Activate(klog.FromContext(ctx), toActivate.Map)
	}
}

// bind runs the Bind plugins, retrying what the server may answer differently a moment
// later (429, 5xx, timeouts). A conflict is success if the pod is in fact on host (an
// earlier attempt landed), else failure.
func (r *run) bind(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, host string) *fwk.Status {
	var status *fwk.Status
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 5, Cap: 2 * time.Second}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		status = f.RunBindPlugins(ctx, state, pod, host)
		if status.IsSuccess() {
			return true, nil
		}
		err := status.AsError()
		switch {
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			live, gerr := r.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if gerr == nil && live.UID == pod.UID && live.Spec.NodeName == host {
				status = nil
			}
			return true, nil
		case apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded):
			return false, nil
		}
		return true, nil
	})
	return status
}

func (r *run) bindFailed(ctx context.Context, f framework.Framework, state fwk.CycleState, assumed *framework.QueuedPodInfo, host string, cycle int64, status *fwk.Status, start time.Time) {
	r.unreserve(ctx, f, state, assumed, host)
	// The resources the pod held are free again: as if an assigned pod went.
	r.queue.moveOnEvent(framework.EventAssignedPodDelete, assumed.Pod, nil)
	r.fail(ctx, f, assumed, cycle, status, clearNomination, start)
}

// fail requeues a pod its cycle could not place and tells why: PodScheduled=False
// (reason Unschedulable, or SchedulerError) with upstream's message, and a
// FailedScheduling event.
func (r *run) fail(ctx context.Context, f framework.Framework, qp *framework.QueuedPodInfo, cycle int64, status *fwk.Status, ni *fwk.NominatingInfo, start time.Time) {
	qp = qp.DeepCopy()
	reason, result := v1.PodReasonSchedulerError, resultError
	if status.IsRejected() {
		reason, result = v1.PodReasonUnschedulable, resultUnschedulable
	}
	r.s.metrics.attempt(result, f.ProfileName(), r.clock.Now().Sub(start).Seconds())
	err := status.AsError()
	qp.UnschedulablePlugins, qp.PendingPlugins = nil, nil
	var fe *framework.FitError
	if errors.As(err, &fe) {
		qp.UnschedulablePlugins, qp.PendingPlugins = fe.Diagnosis.UnschedulablePlugins, fe.Diagnosis.PendingPlugins
	}
	cached, gerr := r.podLister.Pods(qp.Pod.Namespace).Get(qp.Pod.Name)
	if gerr != nil || cached.Spec.NodeName != "" || cached.UID != qp.Pod.UID {
		r.queue.done(qp.Pod.UID)
		return
	}
	qp.PodInfo = podInfo(cached.DeepCopy())
	pod := qp.Pod
	r.queue.addUnschedulable(qp, cycle, !status.IsRejected())
	r.queue.AddNominatedPod(klog.FromContext(ctx), qp.PodInfo, ni)
	if err == nil {
		return
	}
	msg := status.Message()
	if reason == v1.PodReasonSchedulerError {
		r.log.Info("error scheduling pod; retrying", "pod", pod.Namespace+"/"+pod.Name, "err", msg)
	}
	f.EventRecorder().Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", truncate(msg))
	cond := &v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&pod.Status, pod.Generation, v1.PodScheduled)}
	r.binds.Go(func() {
		if err := r.patchStatus(ctx, pod, cond, ni); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
			r.log.Info("pod status not written", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	})
}

// patchStatus writes the PodScheduled condition and the nominated node (when it changes),
// as upstream's updatePod.
func (r *run) patchStatus(ctx context.Context, pod *v1.Pod, cond *v1.PodCondition, ni *fwk.NominatingInfo) error {
	st := pod.Status.DeepCopy()
	nnn := ni.Mode() == fwk.ModeOverride && pod.Status.NominatedNodeName != ni.NominatedNodeName
	changed := cond != nil && podutil.UpdatePodCondition(st, cond)
	if !changed && !nnn {
		return nil
	}
	if nnn {
		st.NominatedNodeName = ni.NominatedNodeName
	}
	return schedutil.PatchPodStatus(ctx, r.client, pod.Name, pod.Namespace, &pod.Status, st)
}

// truncate keeps an event note within the API's limit, as upstream.
func truncate(msg string) string {
	if len(msg) <= validation.NoteLengthLimit {
		return msg
	}
	return msg[:validation.NoteLengthLimit-4] + " ..."
}
