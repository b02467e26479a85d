package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	api "k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"kubeos.dev/kube/internal/storage"
)

var (
	podsResource    = schema.GroupResource{Resource: "pods"}
	bindingResource = schema.GroupResource{Resource: "pods/binding"}
)

// bind serves pods/binding and the bindings resource: the pod gets spec.nodeName and the
// PodScheduled=True condition, as upstream's BindingREST (refused while the pod is being
// deleted, already bound or gated). name is the pod's, from the URL.
func (d *Deps) bind(ctx context.Context, namespace, name string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var b corev1.Binding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
		return nil, apierrors.NewBadRequest("not a Binding object: " + err.Error())
	}
	if name == "" {
		name = b.Name
	}
	if b.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	var in api.Binding
	if err := scheme.Convert(&b, &in, nil); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if errs := corevalidation.ValidatePodBinding(&in); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, name, errs)
	}
	key := storage.Key("", "pods", namespace, name)
	var pre *storage.Preconditions
	if b.UID != "" || b.ResourceVersion != "" {
		pre = &storage.Preconditions{UID: b.UID, ResourceVersion: b.ResourceVersion}
	}
	now := metav1.NewTime(d.now().UTC())
	_, err := d.Store.GuaranteedUpdate(ctx, key, storage.UpdateOptions{Preconditions: pre}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		pod := cur.DeepCopy()
		if pod.GetDeletionTimestamp() != nil {
			return nil, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name)
		}
		if n := strField(pod.Object, "spec", "nodeName"); n != "" {
			return nil, fmt.Errorf("pod %v is already assigned to node %q", name, n)
		}
		if gates, _, _ := unstructured.NestedSlice(pod.Object, "spec", "schedulingGates"); len(gates) > 0 {
			return nil, fmt.Errorf("pod %v has non-empty .spec.schedulingGates", name)
		}
		_ = unstructured.SetNestedField(pod.Object, b.Target.Name, "spec", "nodeName")
		unstructured.RemoveNestedField(pod.Object, "status", "nominatedNodeName")
		if len(b.Annotations) > 0 {
			ann := pod.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			for k, v := range b.Annotations {
				ann[k] = v
			}
			pod.SetAnnotations(ann)
		}
		if len(b.Labels) > 0 {
			// The Binding's labels (the node's zone and region, which PodTopologyLabels
			// admission put there) go onto the pod, as upstream's BindingREST copies them.
			labels := pod.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			for k, v := range b.Labels {
				labels[k] = v
			}
			pod.SetLabels(labels)
		}
		setCondition(pod, "PodScheduled", "True", now)
		return pod, nil
	})
	switch {
	case err == nil:
	case errors.Is(err, storage.ErrNotFound):
		return nil, apierrors.NewNotFound(podsResource, name)
	case errors.Is(err, storage.ErrConflict):
		return nil, apierrors.NewConflict(podsResource, name, err)
	default:
		var se apierrors.APIStatus
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, apierrors.NewConflict(bindingResource, name, err)
	}
	return successStatus(), nil
}

// setCondition sets a pod condition as upstream's UpdatePodCondition: the transition time
// moves only when the status changes.
func setCondition(pod *unstructured.Unstructured, typ, status string, now metav1.Time) {
	conds, _, _ := unstructured.NestedSlice(pod.Object, "status", "conditions")
	for i, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		// Replaced whole, as upstream: no reason, message, lastProbeTime or
		// observedGeneration of the condition it replaces stays.
		ltt := m["lastTransitionTime"]
		if m["status"] != status {
			ltt = now.UTC().Format(time.RFC3339)
		}
		conds[i] = map[string]any{"type": typ, "status": status, "lastProbeTime": nil, "lastTransitionTime": ltt}
		_ = unstructured.SetNestedSlice(pod.Object, conds, "status", "conditions")
		return
	}
	conds = append(conds, map[string]any{"type": typ, "status": status, "lastProbeTime": nil, "lastTransitionTime": now.UTC().Format(time.RFC3339)})
	_ = unstructured.SetNestedSlice(pod.Object, conds, "status", "conditions")
}

func successStatus() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": metav1.StatusSuccess}}
}
