package simnode

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// cstate is the state all of a simulated pod's containers share.
type cstate uint8

const (
	stateNone       cstate = iota // no container statuses yet
	stateCreating                 // waiting ContainerCreating or PodInitializing
	stateRunning                  // running
	stateCrashLoop                // waiting CrashLoopBackOff after a termination
	stateTerminated               // terminated
)

// podShape is what a pod's spec contributes to its status; pods of one template share one.
type podShape struct {
	containers    []containerShape
	inits         []containerShape // restartable ones are sidecars
	restartPolicy corev1.RestartPolicy
	qos           corev1.PodQOSClass
	gates         []corev1.PodConditionType
}

type containerShape struct {
	name, image string
	sidecar     bool
}

// podView is the little the simulator keeps of a pod: enough to match stages and to
// write the status a kubelet would. Times are Unix seconds (the API's precision).
type podView struct {
	namespace, name string
	uid             types.UID
	generation      int64
	rv              uint64
	nodeName        string
	shape           *podShape
	attrs           []*string // the labels and annotations the stage table reads
	ownerKind       string
	deleting        bool
	gatesTrue       bool // every readiness gate's condition is True

	state     cstate
	reason    string // waiting or terminated reason
	message   string
	exitCode  int32
	ready     bool
	restarts  int32
	last      *lastTermination
	ip        uint32
	startTime int64
	sandboxAt int64 // PodReadyToStartContainers became True
	initAt    int64 // Initialized became True
	startedAt int64
	finishAt  int64
	readyAt   int64 // ContainersReady last changed
	// readyWritten is the pod's Ready condition status as stored ("" without one); once a
	// stage applied, what the status write will carry.
	readyWritten corev1.ConditionStatus

	deleteNow bool // the applied stage asks for the final DELETE
}

type lastTermination struct {
	exitCode          int32
	reason            string
	started, finished int64
}

// shapes interns podShapes: a pod's shape key is its containers, policy, QoS and gates.
type shapes map[string]*podShape

func (sh shapes) of(pod *corev1.Pod) *podShape {
	var b strings.Builder
	b.WriteString(string(pod.Spec.RestartPolicy))
	q := pod.Status.QOSClass
	if q == "" {
		q = qos.ComputePodQOS(pod)
	}
	b.WriteString("|" + string(q))
	for _, c := range pod.Spec.InitContainers {
		fmt.Fprintf(&b, "|i:%s=%s:%t", c.Name, c.Image, c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways)
	}
	for _, c := range pod.Spec.Containers {
		fmt.Fprintf(&b, "|c:%s=%s", c.Name, c.Image)
	}
	for _, g := range pod.Spec.ReadinessGates {
		b.WriteString("|g:" + string(g.ConditionType))
	}
	k := b.String()
	if s, ok := sh[k]; ok {
		return s
	}
	s := &podShape{restartPolicy: pod.Spec.RestartPolicy, qos: q}
	for _, c := range pod.Spec.InitContainers {
		s.inits = append(s.inits, containerShape{name: c.Name, image: c.Image, sidecar: c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways})
	}
	for _, c := range pod.Spec.Containers {
		s.containers = append(s.containers, containerShape{name: c.Name, image: c.Image})
	}
	for _, g := range pod.Spec.ReadinessGates {
		s.gates = append(s.gates, g.ConditionType)
	}
	sh[k] = s
	return s
}

// regularInits tells whether the pod has init containers that must complete first.
func (s *podShape) regularInits() bool {
	for _, c := range s.inits {
		if !c.sidecar {
			return true
		}
	}
	return false
}

// viewOf reads a pod into a view: spec shape, the attributes t reads, and the state the
// pod's status shows (so a restarted simulator continues where the pods are).
func viewOf(pod *corev1.Pod, t *table, sh shapes) *podView {
	v := &podView{namespace: pod.Namespace, name: pod.Name, uid: pod.UID, generation: pod.Generation, nodeName: pod.Spec.NodeName,
		shape: sh.of(pod), deleting: pod.DeletionTimestamp != nil}
	v.rv, _ = strconv.ParseUint(pod.ResourceVersion, 10, 64)
	if len(pod.OwnerReferences) > 0 {
		v.ownerKind = pod.OwnerReferences[0].Kind
	}
	if len(t.attrs) > 0 {
		v.attrs = make([]*string, len(t.attrs))
		for i, a := range t.attrs {
			m := pod.Labels
			if a.annotation {
				m = pod.Annotations
			}
			if val, ok := m[a.key]; ok {
				v.attrs[i] = &val
			}
		}
	}
	v.gatesTrue = true
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		v.gatesTrue = v.gatesTrue && ok
	}
	st := &pod.Status
	if st.StartTime != nil {
		v.startTime = st.StartTime.Unix()
	}
	if ip, err := parseIP4(st.PodIP); err == nil {
		v.ip = ip
	}
	for _, c := range st.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers:
			v.sandboxAt = c.LastTransitionTime.Unix()
		case corev1.PodInitialized:
			if c.Status == corev1.ConditionTrue {
				v.initAt = c.LastTransitionTime.Unix()
			}
		case corev1.ContainersReady:
			v.readyAt = c.LastTransitionTime.Unix()
		case corev1.PodReady:
			v.readyWritten = c.Status
		}
	}
	if len(st.ContainerStatuses) > 0 {
		cs := st.ContainerStatuses[0]
		v.restarts, v.ready = cs.RestartCount, cs.Ready
		switch s := cs.State; {
		case s.Running != nil:
			v.state, v.startedAt = stateRunning, s.Running.StartedAt.Unix()
		case s.Terminated != nil:
			v.state, v.reason, v.exitCode = stateTerminated, s.Terminated.Reason, s.Terminated.ExitCode
			v.startedAt, v.finishAt = s.Terminated.StartedAt.Unix(), s.Terminated.FinishedAt.Unix()
		case s.Waiting != nil && s.Waiting.Reason == CrashLoopBackOff:
			v.state, v.reason = stateCrashLoop, s.Waiting.Reason
		case s.Waiting != nil:
			v.state, v.reason = stateCreating, s.Waiting.Reason
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			v.last = &lastTermination{exitCode: t.ExitCode, reason: t.Reason, started: t.StartedAt.Unix(), finished: t.FinishedAt.Unix()}
		}
	}
	return v
}

func parseIP4(s string) (uint32, error) {
	if s == "" {
		return 0, fmt.Errorf("no address")
	}
	base, size, err := parseRange(s + "/32")
	if err != nil || size != 1 {
		return 0, fmt.Errorf("%q is not an IPv4 address", s)
	}
	return base, nil
}

// phase is the pod phase the kubelet derives from its containers (getPhase).
func (v *podView) phase() corev1.PodPhase {
	switch v.state {
	case stateRunning, stateCrashLoop:
		return corev1.PodRunning
	case stateTerminated:
		if v.exitCode == 0 {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

func (v *podView) containersReady() bool { return v.state == stateRunning && v.ready }
func (v *podView) podReady() bool        { return v.containersReady() && v.gatesTrue }

// apply moves v by next at now; alloc gives the pod its address when its sandbox starts
// (0 when the node's range is full: the pod stays without one).
func (v *podView) apply(next *Next, now int64, alloc func() uint32) {
	if next.Delete {
		v.deleteNow = true
	}
	wasReady := v.containersReady()
	switch next.Containers {
	case Creating:
		if v.startTime == 0 {
			v.startTime = now
		}
		if v.sandboxAt == 0 || v.state == stateNone {
			v.sandboxAt = now
		}
		if v.ip == 0 {
			v.ip = alloc()
		}
		v.state, v.reason = stateCreating, "ContainerCreating"
		if v.shape.regularInits() {
			v.reason = "PodInitializing"
		}
	case Running:
		if v.startTime == 0 {
			v.startTime = now
		}
		if v.sandboxAt == 0 {
			v.sandboxAt = now
		}
		if v.ip == 0 {
			v.ip = alloc()
		}
		if v.initAt == 0 {
			v.initAt = now
		}
		v.state, v.reason, v.message, v.startedAt = stateRunning, "", "", now
		v.ready = next.Ready == nil || *next.Ready
	case Terminated, CrashLoopBackOff:
		if v.startTime == 0 {
			v.startTime = now
		}
		code := next.ExitCode
		if next.Containers == CrashLoopBackOff && code == 0 {
			code = 1
		}
		reason := next.Reason
		if reason == "" {
			reason = "Completed"
			if code != 0 {
				reason = "Error"
			}
		}
		p := v.shape.restartPolicy
		restart := !v.deleting && (p == corev1.RestartPolicyAlways || (p == corev1.RestartPolicyOnFailure && code != 0))
		started := v.startedAt
		if started == 0 {
			started = now
		}
		if restart {
			v.restarts++
			v.last = &lastTermination{exitCode: code, reason: reason, started: started, finished: now}
			v.state, v.reason = stateCrashLoop, CrashLoopBackOff
			v.message = fmt.Sprintf("back-off restarting failed container pod=%s_%s(%s)", v.name, v.namespace, v.uid)
		} else {
			v.state, v.reason, v.message, v.exitCode, v.finishAt = stateTerminated, reason, next.Message, code, now
			v.startedAt = started
		}
		v.ready = false
	}
	if v.containersReady() != wasReady || v.readyAt == 0 {
		v.readyAt = now
	}
	// The status written next is the containers': its Ready condition too.
	v.readyWritten = ""
	if v.state != stateNone {
		v.readyWritten = corev1.ConditionFalse
		if v.podReady() {
			v.readyWritten = corev1.ConditionTrue
		}
	}
}

// status is the pod status a kubelet would write for v on a node with address hostIP:
// its conditions in the kubelet's order (PodReadyToStartContainers, Initialized, Ready,
// ContainersReady; PodScheduled is the binding's and stays), container statuses, IPs,
// QoS class and start time.
func (v *podView) status(hostIP string) corev1.PodStatus {
	t := func(s int64) metav1.Time { return metav1.Unix(s, 0) }
	cond := func(typ corev1.PodConditionType, ok bool, since int64, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, ObservedGeneration: v.generation, LastTransitionTime: t(since)}
		if !ok {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, reason, msg
		}
		return c
	}
	ph := v.phase()
	s := corev1.PodStatus{Phase: ph, HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}}, QOSClass: v.shape.qos,
		ObservedGeneration: v.generation}
	if v.startTime != 0 {
		st := t(v.startTime)
		s.StartTime = &st
	}
	if v.ip != 0 {
		ip := ipString(v.ip)
		s.PodIP, s.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	sandbox := v.sandboxAt != 0 && v.state != stateNone && v.state != stateTerminated
	sandboxSince := v.sandboxAt
	if !sandbox && v.state == stateTerminated {
		sandboxSince = max(v.finishAt, v.sandboxAt)
	}
	if sandboxSince == 0 {
		sandboxSince = v.startTime
	}
	var names []string
	for _, c := range v.shape.containers {
		names = append(names, c.name)
	}
	for _, c := range v.shape.inits {
		if c.sidecar {
			names = append(names, c.name)
		}
	}
	initialized := v.initAt != 0 || !v.shape.regularInits()
	var initNames []string
	for _, c := range v.shape.inits {
		if !c.sidecar {
			initNames = append(initNames, c.name)
		}
	}
	initSince := v.initAt
	if initSince == 0 {
		initSince = v.startTime
	}
	readyReason, readyMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: %v", names)
	switch ph {
	case corev1.PodSucceeded:
		readyReason, readyMsg = "PodCompleted", ""
	case corev1.PodFailed:
		readyReason, readyMsg = "PodFailed", ""
	}
	podReadyReason, podReadyMsg := readyReason, readyMsg
	if v.containersReady() && !v.gatesTrue {
		podReadyReason, podReadyMsg = "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %v does not exist or is not True", v.shape.gates)
	}
	s.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandbox, sandboxSince, "", ""),
		cond(corev1.PodInitialized, initialized, initSince, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: %v", initNames)),
		cond(corev1.PodReady, v.podReady(), v.readyAt, podReadyReason, podReadyMsg),
		cond(corev1.ContainersReady, v.containersReady(), v.readyAt, readyReason, readyMsg),
	}
	if !sandbox {
		s.Conditions[0].Reason = ""
	}
	for _, c := range v.shape.inits {
		cs := corev1.ContainerStatus{Name: c.name, Image: c.image, ImageID: c.image}
		switch {
		case c.sidecar:
			cs = v.containerStatus(c)
		case initialized:
			cs.State.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: t(sandboxSince), FinishedAt: t(initSince), ContainerID: v.containerID(c.name)}
			cs.ContainerID = cs.State.Terminated.ContainerID
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
		}
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
	}
	for _, c := range v.shape.containers {
		s.ContainerStatuses = append(s.ContainerStatuses, v.containerStatus(c))
	}
	return s
}

func (v *podView) containerID(name string) string {
	return "sim://" + string(v.uid) + "/" + name
}

func (v *podView) containerStatus(c containerShape) corev1.ContainerStatus {
	t := func(s int64) metav1.Time { return metav1.Unix(s, 0) }
	f := false
	cs := corev1.ContainerStatus{Name: c.name, Image: c.image, ImageID: c.image, RestartCount: v.restarts, Started: &f}
	switch v.state {
	case stateNone, stateCreating:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: v.reason}
		if cs.State.Waiting.Reason == "" {
			cs.State.Waiting.Reason = "ContainerCreating"
		}
	case stateRunning:
		tr := true
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: t(v.startedAt)}
		cs.Ready, cs.Started, cs.ContainerID = v.ready, &tr, v.containerID(c.name)
	case stateCrashLoop:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: CrashLoopBackOff, Message: v.message}
	case stateTerminated:
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: v.exitCode, Reason: v.reason, Message: v.message,
			StartedAt: t(v.startedAt), FinishedAt: t(v.finishAt), ContainerID: v.containerID(c.name)}
		cs.ContainerID = cs.State.Terminated.ContainerID
	}
	if l := v.last; l != nil {
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: l.exitCode, Reason: l.reason,
			StartedAt: t(l.started), FinishedAt: t(l.finished), ContainerID: v.containerID(c.name)}
	}
	return cs
}

// plan runs the stage table over v at now: zero-delay stages apply at once, one after
// the other (at most maxChain), and the first stage with a later due time is returned
// with it (-1 when none matches). changed tells whether v now differs from what the
// pod shows (a status to write, or deleteNow for the final DELETE). A Delete stage is
// not applied over unwritten changes: the kubelet writes the terminal status first.
// changed starts as the caller's: whether v already carries unwritten changes.
func (t *table) plan(v *podView, now time.Time, since time.Time, jitter func() float64, alloc func() uint32, changed bool) (_ bool, stage int, due time.Time) {
	const maxChain = 8
	for range maxChain {
		i := t.match(v)
		if i < 0 {
			return changed, -1, time.Time{}
		}
		d := t.due(i, v, since, jitter())
		if d.After(now) {
			return changed, i, d
		}
		if t.stages[i].Next.Delete && changed {
			return changed, i, now
		}
		v.apply(&t.stages[i].Next, now.Unix(), alloc)
		changed = true
		since = now
		if v.deleteNow {
			return true, -1, time.Time{}
		}
	}
	return changed, -1, time.Time{}
}
