package platform

import (
	"fmt"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// componentWorkloadState is what a Component's status shows of its live workload.
type componentWorkloadState struct {
	Replicas, Ready, Updated int32
	Image                    string
	// Done: ready replicas == desired with the current template rolled out (a Job:
	// complete; a CronJob: created).
	Done bool
	// Failed is a Job that failed (its condition's message in Message).
	Failed bool
	// Message says what is under way when not Done.
	Message string
}

func componentImage(spec corev1.PodSpec) string {
	for _, c := range spec.Containers {
		if c.Name == v1alpha1.ComponentContainer {
			return c.Image
		}
	}
	return ""
}

// readComponentWorkload reads the state of a live workload.
func readComponentWorkload(obj client.Object) componentWorkloadState {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		s := componentWorkloadState{Replicas: want, Ready: w.Status.ReadyReplicas, Updated: w.Status.UpdatedReplicas, Image: componentImage(w.Spec.Template.Spec)}
		current := w.Status.ObservedGeneration >= w.Generation
		s.Done = current && s.Updated == want && s.Ready >= want && w.Status.Replicas == want && w.Status.AvailableReplicas >= want
		s.Message = fmt.Sprintf("%d/%d replicas ready, %d updated", s.Ready, want, s.Updated)
		for _, c := range w.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
				s.Message += "; " + c.Reason + ": " + c.Message
			}
		}
		return s
	case *appsv1.StatefulSet:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		s := componentWorkloadState{Replicas: want, Ready: w.Status.ReadyReplicas, Updated: w.Status.UpdatedReplicas, Image: componentImage(w.Spec.Template.Spec)}
		current := w.Status.ObservedGeneration >= w.Generation && (w.Status.UpdateRevision == "" || w.Status.CurrentRevision == w.Status.UpdateRevision)
		s.Done = current && s.Ready >= want && w.Status.Replicas == want && (want == 0 || s.Updated == want)
		s.Message = fmt.Sprintf("%d/%d replicas ready, %d updated", s.Ready, want, s.Updated)
		return s
	case *batchv1.Job:
		want := int32(1)
		if w.Spec.Completions != nil {
			want = *w.Spec.Completions
		}
		s := componentWorkloadState{Replicas: want, Ready: w.Status.Succeeded, Updated: w.Status.Succeeded, Image: componentImage(w.Spec.Template.Spec)}
		for _, c := range w.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				s.Done = true
			case batchv1.JobFailed:
				s.Failed, s.Message = true, c.Reason+": "+c.Message
			}
		}
		if !s.Done && !s.Failed {
			s.Message = fmt.Sprintf("%d/%d completions, %d active", w.Status.Succeeded, want, w.Status.Active)
		}
		return s
	case *batchv1.CronJob:
		return componentWorkloadState{Done: true, Image: componentImage(w.Spec.JobTemplate.Spec.Template.Spec), Replicas: int32(len(w.Status.Active))}
	}
	return componentWorkloadState{}
}

// componentBlockingReasons are container waiting reasons that keep a pod from becoming ready by
// themselves (not a step on the way).
var componentBlockingReasons = []string{"ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "ErrImageNeverPull"}

// componentPodBlocker finds why pods are not becoming ready: the first (by name) container waiting
// with a blocking reason, else an unschedulable pod. Empty when nothing blocks.
func componentPodBlocker(pods []corev1.Pod) (reason, message string) {
	pods = slices.Clone(pods)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && slices.Contains(componentBlockingReasons, w.Reason) {
				msg := fmt.Sprintf("pod %s: container %s: %s", p.Name, cs.Name, w.Reason)
				if w.Message != "" {
					msg += ": " + w.Message
				}
				return w.Reason, msg
			}
		}
	}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return "Unschedulable", fmt.Sprintf("pod %s: %s", p.Name, c.Message)
			}
		}
	}
	return "", ""
}
