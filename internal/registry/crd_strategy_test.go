package registry

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func statusTestCRD(acceptedKind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com", "uid": "u1", "resourceVersion": "5",
			"creationTimestamp": "2026-11-30T00:00:00Z"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}}},
		"status": map[string]any{
			"acceptedNames":  map[string]any{"plural": "widgets", "singular": "widget", "kind": acceptedKind, "listKind": "WidgetList"},
			"storedVersions": []any{"v1"},
			"conditions": []any{map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
				"lastTransitionTime": "2026-11-30T00:00:00Z", "message": "the initial names have been accepted"}},
		},
	}}
}

// TestCRDStatusUpdateValidation: a status write is checked on metadata and status, as
// upstream's status strategy does, whatever the spec holds.
func TestCRDStatusUpdateValidation(t *testing.T) {
	old := statusTestCRD("Widget")
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string // substring of the errors; "" for none
	}{
		{"valid", statusTestCRD("Widget"), ""},
		{"bad accepted kind", statusTestCRD("wid get"), "status.acceptedNames.kind"},
		{"renamed", func() *unstructured.Unstructured {
			o := statusTestCRD("Widget")
			o.SetName("gadgets.example.com")
			return o
		}(), "metadata.name"},
		{"spec not checked", func() *unstructured.Unstructured {
			o := statusTestCRD("Widget")
			o.Object["spec"].(map[string]any)["scope"] = "Nowhere"
			return o
		}(), ""},
	} {
		errs := crdStrategy{}.ValidateStatusUpdate(tc.obj, old)
		got := errs.ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %v", tc.name, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("%s: errors %v, want one on %s", tc.name, got, tc.want)
		}
	}
}
