package pods

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// containerObs is what one sync saw of one container of the spec.
type containerObs struct {
	Spec *corev1.Container
	// Latest is the runtime's newest container for it (nil: none yet); Previous the one
	// before (for lastState), when still kept.
	Latest, Previous *runtimeapi.ContainerStatus
	// Waiting is the reason it is not running when the sync decided one (ErrImagePull,
	// CrashLoopBackOff, CreateContainerConfigError, ...); nil means ContainerCreating or
	// PodInitializing.
	Waiting *corev1.ContainerStateWaiting
	// Ready and Started are the probe results.
	Ready, Started bool
}

// observation is what one sync saw of a pod.
type observation struct {
	SandboxReady bool
	PodIP        string
	HostIP       string
	Init         []containerObs
	Containers   []containerObs
	Ephemeral    []containerObs
}

const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
)

func crTime(ns int64) metav1.Time {
	if ns == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns))
}

// terminated is the CRI status of an exited container in the API's form.
func terminated(s *runtimeapi.ContainerStatus) *corev1.ContainerStateTerminated {
	reason := s.Reason
	if reason == "" {
		if s.ExitCode == 0 {
			reason = "Completed"
		} else {
			reason = "Error"
		}
	}
	return &corev1.ContainerStateTerminated{ExitCode: s.ExitCode, Reason: reason, Message: s.Message,
		StartedAt: crTime(s.StartedAt), FinishedAt: crTime(s.FinishedAt), ContainerID: "containerd://" + s.Id}
}

// containerStatus is one entry of status.containerStatuses. prev is the entry last
// written, for the lastState of a container the runtime no longer keeps.
func containerStatus(o containerObs, prev *corev1.ContainerStatus, defaultWaiting string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: o.Spec.Name, Image: o.Spec.Image}
	l := o.Latest
	if l == nil {
		w := o.Waiting
		if w == nil {
			w = &corev1.ContainerStateWaiting{Reason: defaultWaiting}
		}
		cs.State.Waiting = w
		if prev != nil {
			cs.RestartCount, cs.LastTerminationState = prev.RestartCount, prev.LastTerminationState
		}
		return cs
	}
	cs.RestartCount = int32(l.GetMetadata().GetAttempt())
	cs.ContainerID = "containerd://" + l.Id
	if l.ImageRef != "" {
		cs.ImageID = l.ImageRef
	}
	switch l.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: crTime(l.StartedAt)}
		cs.Ready = o.Ready
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		t := terminated(l)
		if o.Waiting != nil {
			// Restarting (CrashLoopBackOff): waiting now, the exit in lastState.
			cs.State.Waiting = o.Waiting
			cs.LastTerminationState.Terminated = t
		} else {
			cs.State.Terminated = t
		}
		cs.Started = new(bool)
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reasonContainerCreating}
		if o.Waiting != nil {
			cs.State.Waiting = o.Waiting
		}
	}
	if cs.Started == nil && l.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		started := o.Started
		cs.Started = &started
	}
	if cs.LastTerminationState.Terminated == nil {
		switch {
		case o.Previous != nil && o.Previous.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			cs.LastTerminationState.Terminated = terminated(o.Previous)
		case prev != nil && prev.LastTerminationState.Terminated != nil && prev.RestartCount == cs.RestartCount:
			cs.LastTerminationState = prev.LastTerminationState
		case prev != nil && prev.State.Terminated != nil && prev.RestartCount < cs.RestartCount:
			cs.LastTerminationState.Terminated = prev.State.Terminated
		}
	}
	return cs
}

func findStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// generateStatus is the pod's status as the kubelet writes it: container statuses, phase
// (getPhase), the conditions PodReadyToStartContainers, Initialized, ContainersReady and
// Ready in that order (transition times kept while a status stays), IPs, QoS class. Pure.
func generateStatus(pod *corev1.Pod, o observation, now time.Time) corev1.PodStatus {
	old := pod.Status
	st := corev1.PodStatus{
		HostIP:    o.HostIP,
		StartTime: old.StartTime,
		QOSClass:  qos.GetPodQOS(pod),
	}
	if st.StartTime == nil {
		t := metav1.NewTime(now)
		st.StartTime = &t
	}
	if o.HostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: o.HostIP}}
	}
	if o.PodIP != "" {
		st.PodIP = o.PodIP
		st.PodIPs = []corev1.PodIP{{IP: o.PodIP}}
	}
	// Initialized: every regular init container completed and every sidecar started, or
	// a regular container ran already (sidecars restarting do not undo it).
	var notInit, notReady []string
	for _, c := range o.Init {
		cs := containerStatus(c, findStatus(old.InitContainerStatuses, c.Spec.Name), reasonPodInitializing)
		if isSidecar(c.Spec) {
			if cs.Started == nil || !*cs.Started {
				notInit = append(notInit, cs.Name)
			}
			if !cs.Ready {
				notReady = append(notReady, cs.Name)
			}
		} else {
			t := cs.State.Terminated
			cs.Ready = t != nil && t.ExitCode == 0
			if !cs.Ready {
				notInit = append(notInit, cs.Name)
			}
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	started := false
	for _, c := range o.Containers {
		if c.Latest != nil {
			started = true
		}
	}
	initDone := len(notInit) == 0 || started
	waitingReason := reasonContainerCreating
	if !initDone {
		waitingReason = reasonPodInitializing
	}
	for _, c := range o.Containers {
		cs := containerStatus(c, findStatus(old.ContainerStatuses, c.Spec.Name), waitingReason)
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	// Ephemeral containers: never ready, no probes, no part in the phase.
	for _, c := range o.Ephemeral {
		cs := containerStatus(c, findStatus(old.EphemeralContainerStatuses, c.Spec.Name), reasonContainerCreating)
		cs.Ready, cs.Started = false, nil
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, cs)
	}
	allReady := len(o.Containers) > 0 && len(notReady) == 0
	st.Phase = phase(pod, st, started)

	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, ObservedGeneration: pod.Generation}
		if ok {
			c.Status = corev1.ConditionTrue
		} else {
			c.Reason, c.Message = reason, msg
		}
		c.LastTransitionTime = metav1.NewTime(now)
		for _, oc := range old.Conditions {
			if oc.Type == t && oc.Status == c.Status {
				c.LastTransitionTime = oc.LastTransitionTime
			}
		}
		st.Conditions = append(st.Conditions, c)
	}
	// PodScheduled is the binding's; the kubelet adds it (True) to a pod bound by
	// spec.nodeName at creation, which has none.
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
	for _, oc := range old.Conditions {
		if oc.Type == corev1.PodScheduled {
			scheduled = oc
		}
	}
	st.Conditions = append(st.Conditions, scheduled)
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	cond(corev1.PodReadyToStartContainers, o.SandboxReady && !terminal, "", "")
	if initDone || st.Phase == corev1.PodSucceeded {
		cond(corev1.PodInitialized, true, "", "")
	} else {
		cond(corev1.PodInitialized, false, "ContainersNotInitialized", "containers with incomplete status: "+list(notInit))
	}
	ready := allReady && !terminal
	reason, msg := "ContainersNotReady", "containers with unready status: "+list(notReady)
	if terminal {
		reason = "PodCompleted"
		msg = ""
	}
	cond(corev1.ContainersReady, ready, reason, msg)
	gatesOK := true
	var missing []string
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, oc := range old.Conditions {
			if oc.Type == g.ConditionType && oc.Status == corev1.ConditionTrue {
				found = true
			}
		}
		if !found {
			gatesOK = false
			missing = append(missing, string(g.ConditionType))
		}
	}
	switch {
	case ready && !gatesOK:
		cond(corev1.PodReady, false, "ReadinessGatesNotReady", "corresponding condition of pod readiness gate "+list(missing)+" does not exist.")
	default:
		cond(corev1.PodReady, ready && gatesOK, reason, msg)
	}
	// Conditions others own (readiness gates, DisruptionTarget) stay.
	for _, oc := range old.Conditions {
		switch oc.Type {
		case corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		default:
			st.Conditions = append(st.Conditions, oc)
		}
	}
	return st
}

func list(names []string) string {
	s := "["
	for i, n := range names {
		if i > 0 {
			s += " "
		}
		s += n
	}
	return s + "]"
}

// phase is the kubelet's getPhase for a pod not being terminated: started says a regular
// container ran (the pod initialized before, so sidecars restarting do not make it
// Pending); restarts follow each container's restartPolicy (and rules) or the pod's.
// Pure.
func phase(pod *corev1.Pod, st corev1.PodStatus, started bool) corev1.PodPhase {
	spec := &pod.Spec
	var pendingInit, pendingSidecars, failedInit int
	var unknown, running, waiting, stopped, stoppedForGood, succeeded int
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		cs := findStatus(st.InitContainerStatuses, c.Name)
		if isSidecar(c) {
			switch {
			case cs == nil:
				unknown++
			case cs.State.Running != nil:
				if cs.Started == nil || !*cs.Started {
					pendingSidecars++
				}
				running++
			case cs.State.Terminated != nil, cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
				// A sidecar that exited counts for nothing.
			case cs.State.Waiting != nil:
				pendingSidecars++
				waiting++
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		var exit *corev1.ContainerStateTerminated
		switch {
		case cs == nil, cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			exit = cs.State.Terminated
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			exit = cs.LastTerminationState.Terminated
		default:
			pendingInit++
		}
		if exit != nil && exit.ExitCode != 0 && !podutil.ContainerShouldRestart(*c, *spec, exit.ExitCode) {
			failedInit++
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		cs := findStatus(st.ContainerStatuses, c.Name)
		var exit *corev1.ContainerStateTerminated
		switch {
		case cs == nil:
			unknown++
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			exit = cs.State.Terminated
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			exit = cs.LastTerminationState.Terminated
		case cs.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
		if exit != nil {
			stopped++
			if !podutil.ContainerShouldRestart(*c, *spec, exit.ExitCode) {
				stoppedForGood++
			}
			if cs.State.Terminated != nil && exit.ExitCode == 0 {
				succeeded++
			}
		}
	}
	switch {
	case failedInit > 0:
		return corev1.PodFailed
	case pendingInit > 0 || pendingSidecars > 0 && !started || waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if stopped != stoppedForGood {
			return corev1.PodRunning // restarting
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// statusEqual reports whether writing b over a would change nothing.
func statusEqual(a, b corev1.PodStatus) bool { return equality.Semantic.DeepEqual(a, b) }
