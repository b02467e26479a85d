package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// namespaceStrategy adds to the namespace strategy what a namespace's deletion needs, as
// kube-apiserver's namespace storage does: the delete marks the namespace Terminating, and
// it stays until the namespace controller has deleted its content and removed the
// "kubernetes" entry of spec.finalizers (through the finalize subresource). The REST handler
// finds these methods through its DeletionHolder interface.
type namespaceStrategy struct {
	Strategy
}

// PrepareForDelete sets status.phase to Terminating as the deletionTimestamp is set. Upstream's
// namespace storage sets the timestamp alone: no deletionGracePeriodSeconds, which the
// generic path sets to 0 on other kinds held by finalizers.
func (namespaceStrategy) PrepareForDelete(obj *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(obj.Object, string(corev1.NamespaceTerminating), "status", "phase")
	obj.SetDeletionGracePeriodSeconds(nil)
}

// HoldsDeletion reports whether spec.finalizers still holds the namespace.
func (namespaceStrategy) HoldsDeletion(obj *unstructured.Unstructured) bool {
	fins, _, _ := unstructured.NestedSlice(obj.Object, "spec", "finalizers")
	return len(fins) > 0
}
