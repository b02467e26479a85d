package pods

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// reasonEvicted is the kubelet's reason for an evicted pod.
const reasonEvicted = "Evicted"

// Kill stops the pod uid as the kubelet's eviction manager and graceful node shutdown do:
// each running container's preStop hook and stop signal within grace seconds (SIGKILL at
// its end; sidecars last, in reverse order, as on deletion: stopAll), the sandbox stopped, and the pod's status written terminal — phase Failed,
// reason and message, and the DisruptionTarget condition (reason TerminationByKubelet).
// The pod stays in the API, where its controller sees it failed; its worker starts nothing
// for it again. It returns once the status is written.
func (m *Manager) Kill(ctx context.Context, uid types.UID, grace int64, reason, message string) error {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w == nil {
		return fmt.Errorf("pods: pod %s does not run on this node", uid)
	}
	// The worker's sync in progress ends first; none starts while this runs.
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.killed = true
	pod := m.pod(w.key, w.uid)
	if pod == nil {
		return fmt.Errorf("pods: pod %s is gone", w.key)
	}
	grace = max(grace, 1)
	if reason == reasonEvicted && m.recorder != nil {
		// The kubelet's eviction manager records the eviction on the pod.
		m.recorder.Event(pod, corev1.EventTypeWarning, reason, message)
	}
	if err := w.stopAll(ctx, pod, grace); err != nil {
		return err
	}
	m.probes.forgetPod(w.uid)
	sbs, _ := w.sandboxes(ctx)
	for _, sb := range sbs {
		_ = m.opts.Runtime.StopPodSandbox(ctx, sb.Id)
	}
	byName, err := w.containers(ctx)
	if err != nil {
		return err
	}
	obs := observation{HostIP: m.opts.HostIP()}
	for i := range pod.Spec.InitContainers {
		obs.Init = append(obs.Init, terminatedObs(&pod.Spec.InitContainers[i], byName[pod.Spec.InitContainers[i].Name]))
	}
	for i := range pod.Spec.Containers {
		obs.Containers = append(obs.Containers, terminatedObs(&pod.Spec.Containers[i], byName[pod.Spec.Containers[i].Name]))
	}
	for attempt := 0; ; attempt++ {
		p := pod.DeepCopy()
		p.Status = w.oldStatus(pod)
		p.Status = killedStatus(p, obs, reason, message, time.Now())
		out, err := m.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			w.last = &out.Status
			w.lastRV, _ = strconv.ParseInt(out.ResourceVersion, 10, 64)
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return fmt.Errorf("pods: status of killed pod %s: %w", w.key, err)
		}
		fresh, gerr := m.opts.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("pods: status of killed pod %s: %w", w.key, gerr)
		}
		if fresh.UID != pod.UID {
			return nil
		}
		pod, w.last = fresh, nil
	}
}

// killedStatus is the terminal status of a pod the node killed. Pure.
func killedStatus(pod *corev1.Pod, obs observation, reason, message string, now time.Time) corev1.PodStatus {
	st := generateStatus(pod, obs, now)
	st.Phase, st.Reason, st.Message = corev1.PodFailed, reason, message
	for i := range st.Conditions {
		switch st.Conditions[i].Type {
		case corev1.PodReady, corev1.ContainersReady, corev1.PodReadyToStartContainers:
			if st.Conditions[i].Status == corev1.ConditionTrue {
				st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now)
			}
			if st.Conditions[i].Type != corev1.PodReadyToStartContainers {
				st.Conditions[i].Reason, st.Conditions[i].Message = "PodFailed", ""
			}
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		ObservedGeneration: pod.Generation, Reason: corev1.PodReasonTerminationByKubelet, Message: message, LastTransitionTime: metav1.NewTime(now)})
	return st
}
