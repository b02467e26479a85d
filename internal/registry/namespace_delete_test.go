package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNamespaceDeletion(t *testing.T) {
	var ns *Kind
	for _, k := range Builtins() {
		if k.Group == "" && k.Resource == "namespaces" {
			ns = k
		}
	}
	holder, ok := ns.StrategyOrDefault().(interface {
		PrepareForDelete(obj *unstructured.Unstructured)
		HoldsDeletion(obj *unstructured.Unstructured) bool
	})
	if !ok {
		t.Fatalf("the namespace strategy %T does not hold deletions", ns.StrategyOrDefault())
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a"}}}
	ns.StrategyOrDefault().PrepareForCreate(obj)
	if !holder.HoldsDeletion(obj) {
		t.Errorf("a new namespace (spec.finalizers %v) does not hold its deletion", obj.Object["spec"])
	}
	holder.PrepareForDelete(obj)
	if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase != "Terminating" {
		t.Errorf("phase after PrepareForDelete = %q, want Terminating", phase)
	}
	unstructured.RemoveNestedField(obj.Object, "spec", "finalizers")
	if holder.HoldsDeletion(obj) {
		t.Errorf("a namespace without spec.finalizers holds its deletion")
	}
}
