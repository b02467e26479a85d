package workload

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// maxDisruptedPods is upstream's MaxDisruptedPodSize: a budget tracks at most this many
// evictions the disruption controller has not yet seen.
const maxDisruptedPods = 2000

// evict serves pods/eviction as upstream's EvictionREST: a pod covered by a disruption
// budget is deleted only while the budget allows a disruption (which the eviction uses up);
// otherwise 429 with the budget named. Pods that cannot count against a budget (terminal,
// pending, already deleting, or unhealthy when the budget's policy allows) are deleted at
// once.
func (d *Deps) evict(ctx context.Context, namespace, name string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var ev policyv1.Eviction
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ev); err != nil {
		return nil, apierrors.NewBadRequest("not an Eviction object: " + err.Error())
	}
	if ev.Name != "" && ev.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	opts := metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	pods := d.Client.CoreV1().Pods(namespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	del := func() (*unstructured.Unstructured, error) {
		o := opts
		if o.Preconditions == nil {
			o.Preconditions = &metav1.Preconditions{UID: &pod.UID}
		}
		if err := pods.Delete(ctx, name, o); err != nil {
			return nil, err
		}
		return successStatus(), nil
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodPending {
		return del()
	}
	pdbs, err := d.Client.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var matching []policyv1.PodDisruptionBudget
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			matching = append(matching, pdb)
		}
	}
	switch len(matching) {
	case 0:
		return del()
	case 1:
	default:
		return nil, apierrors.NewInternalError(fmt.Errorf("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	}
	pdbName := matching[0].Name
	budgets := d.Client.PolicyV1().PodDisruptionBudgets(namespace)
	err = retry.OnError(wait.Backoff{Steps: 5, Duration: 10e6, Factor: 2}, apierrors.IsConflict, func() error {
		pdb, err := budgets.Get(ctx, pdbName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(pod) {
			// Unhealthy pods: AlwaysAllow lets them go; IfHealthyBudget (the default) only
			// when the budget is healthy, in both cases without using a disruption.
			if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
				return nil
			}
			if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
				return nil
			}
		}
		if pdb.Status.ObservedGeneration < pdb.Generation {
			return tooManyRequests(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
		}
		if pdb.Status.DisruptionsAllowed < 0 {
			return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
		}
		if len(pdb.Status.DisruptedPods) > maxDisruptedPods {
			return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
		}
		if pdb.Status.DisruptionsAllowed == 0 {
			return tooManyRequests(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
		}
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[pod.Name] = metav1.NewTime(d.now())
		_, err = budgets.UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return del()
}

// tooManyRequests is upstream's refusal of an eviction the budget does not allow.
func tooManyRequests(cause string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
