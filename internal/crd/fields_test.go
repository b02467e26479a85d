package crd

import (
	"encoding/json"
	"maps"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"kubeos.dev/kube/internal/registry"
)

func compileJSON(t *testing.T, s string) []*registry.Kind {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal([]byte(s), crd); err != nil {
		t.Fatal(err)
	}
	stripped, err := Strip(crd)
	if err != nil {
		t.Fatal(err)
	}
	return Compile(stripped, crd.Spec.Names, Options{}, false)
}

// TestSelectableFields: a custom resource's field set is metadata.name, metadata.namespace
// (namespaced only) and its version's selectableFields, valued as upstream's strategy
// values them; each version has its own.
func TestSelectableFields(t *testing.T) {
	kinds := compileJSON(t, `{"metadata":{"name":"gears.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
	"names":{"plural":"gears","kind":"Gear"},
	"versions":[
	 {"name":"v1","served":true,"storage":true,"selectableFields":[{"jsonPath":".spec.color"},{"jsonPath":".spec.teeth"},{"jsonPath":".spec.oiled"},{"jsonPath":".spec.nested.size"}],
	  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
	 {"name":"v2","served":true,"storage":false,"selectableFields":[{"jsonPath":".spec.shade"}],
	  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
	 {"name":"v3","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	if len(kinds) != 3 {
		t.Fatalf("kinds: %d", len(kinds))
	}
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gear",
			"metadata": map[string]any{"name": "g", "namespace": "ns", "labels": map[string]any{"app": "x"}}, "spec": spec}}
	}
	tests := []struct {
		name string
		kind int
		obj  *unstructured.Unstructured
		want fields.Set
	}{
		{"values", 0, obj(map[string]any{"color": "red", "teeth": int64(12), "oiled": true, "nested": map[string]any{"size": int64(3)}}),
			fields.Set{"metadata.name": "g", "metadata.namespace": "ns", "spec.color": "red", "spec.teeth": "12", "spec.oiled": "true", "spec.nested.size": "3"}},
		{"false and zero", 0, obj(map[string]any{"color": "", "teeth": int64(0), "oiled": false}),
			fields.Set{"metadata.name": "g", "metadata.namespace": "ns", "spec.color": "", "spec.teeth": "0", "spec.oiled": "false", "spec.nested.size": ""}},
		{"absent, null and not an object", 0, obj(map[string]any{"color": nil, "nested": "flat"}),
			fields.Set{"metadata.name": "g", "metadata.namespace": "ns", "spec.color": "", "spec.teeth": "", "spec.oiled": "", "spec.nested.size": ""}},
		{"no spec", 0, &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g", "namespace": "ns"}}},
			fields.Set{"metadata.name": "g", "metadata.namespace": "ns", "spec.color": "", "spec.teeth": "", "spec.oiled": "", "spec.nested.size": ""}},
		{"other version's fields", 1, obj(map[string]any{"color": "red", "shade": "dark"}),
			fields.Set{"metadata.name": "g", "metadata.namespace": "ns", "spec.shade": "dark"}},
		{"no selectable fields", 2, obj(map[string]any{"color": "red"}),
			fields.Set{"metadata.name": "g", "metadata.namespace": "ns"}},
		// What the REST handler probes to learn the supported field labels.
		{"empty object", 0, &unstructured.Unstructured{Object: map[string]any{}},
			fields.Set{"metadata.name": "", "metadata.namespace": "", "spec.color": "", "spec.teeth": "", "spec.oiled": "", "spec.nested.size": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, f := kinds[tt.kind].AttrFunc()(tt.obj)
			if !maps.Equal(f, tt.want) {
				t.Errorf("fields %v, want %v", f, tt.want)
			}
			if !maps.Equal(l, tt.obj.GetLabels()) {
				t.Errorf("labels %v, want %v", l, tt.obj.GetLabels())
			}
		})
	}
}

// TestSelectableFieldsClusterScoped: a cluster-scoped custom resource has no
// metadata.namespace field, as upstream (which answers "field label not supported").
func TestSelectableFieldsClusterScoped(t *testing.T) {
	kinds := compileJSON(t, `{"metadata":{"name":"zones.example.com"},"spec":{"group":"example.com","scope":"Cluster",
	"names":{"plural":"zones","kind":"Zone"},
	"versions":[{"name":"v1","served":true,"storage":true,"selectableFields":[{"jsonPath":".spec.region"}],
	  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	_, f := kinds[0].AttrFunc()(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "z"}, "spec": map[string]any{"region": "eu"}}})
	if want := (fields.Set{"metadata.name": "z", "spec.region": "eu"}); !maps.Equal(f, want) {
		t.Errorf("fields %v, want %v", f, want)
	}
}

// TestSelectableFieldPaths: plain field paths are read directly; other JSONPaths (only a
// CRD stored without validation can have them) are evaluated as upstream does.
func TestSelectableFieldPaths(t *testing.T) {
	content := map[string]any{"spec": map[string]any{"a": map[string]any{"b": "ab"}, "list": []any{"x", "y"}, "one": []any{"z"}}}
	tests := []struct {
		path, name, want string
		plain            bool
	}{
		{".spec.a.b", "spec.a.b", "ab", true},
		{".spec.one[0]", "spec.one[0]", "z", false},
		{".spec.list[*]", "spec.list[*]", "", false}, // several results
		{".spec[", "spec[", "", false},               // does not parse
	}
	for _, tt := range tests {
		sf := newSelectableField(tt.path)
		if sf.name != tt.name || (sf.steps != nil) != tt.plain {
			t.Errorf("%s: name %q plain %v, want %q %v", tt.path, sf.name, sf.steps != nil, tt.name, tt.plain)
		}
		if got := sf.value(content); got != tt.want {
			t.Errorf("%s: value %q, want %q", tt.path, got, tt.want)
		}
	}
}
