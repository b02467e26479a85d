package platform

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// TestAdmitAddsEngineFinalizer: a create of a kind the engine drives gets the engine's
// finalizer once, beside the ones it has; updates, subresources, kinds the engine does not
// drive and other groups are left alone.
func TestAdmitAddsEngineFinalizer(t *testing.T) {
	e, err := lifecycle.NewEngine(lifecycle.EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.Register(e, lifecycle.KindOptions[*v1alpha1.Alert]{Kind: "Alert", New: func() *v1alpha1.Alert { return &v1alpha1.Alert{} },
		Driver: nopDriver[*v1alpha1.Alert]{}}); err != nil {
		t.Fatal(err)
	}
	a := &Admission{Engine: e}
	alert := schema.GroupVersionKind{Group: v1alpha1.Group, Version: "v1alpha1", Kind: "Alert"}
	cases := []struct {
		name        string
		op          admission.Operation
		gvk         schema.GroupVersionKind
		subresource string
		have, want  []string
	}{
		{"create", admission.Create, alert, "", nil, []string{lifecycle.Finalizer}},
		{"create with finalizers of its own", admission.Create, alert, "", []string{"x/y"}, []string{"x/y", lifecycle.Finalizer}},
		{"create that has it already", admission.Create, alert, "", []string{lifecycle.Finalizer}, []string{lifecycle.Finalizer}},
		{"update", admission.Update, alert, "", nil, nil},
		{"status", admission.Create, alert, "status", nil, nil},
		{"a kind the engine does not drive", admission.Create, schema.GroupVersionKind{Group: v1alpha1.Group, Version: "v1alpha1", Kind: "Nothing"}, "", nil, nil},
		{"another group", admission.Create, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Alert"}, "", nil, nil},
	}
	for _, c := range cases {
		obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a"}}}
		if c.have != nil {
			obj.SetFinalizers(c.have)
		}
		if err := a.Admit(context.Background(), &admission.Attributes{Operation: c.op, Kind: c.gvk, Subresource: c.subresource, Object: obj}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := obj.GetFinalizers(); !slices.Equal(got, c.want) {
			t.Errorf("%s: finalizers %v, want %v", c.name, got, c.want)
		}
	}
}
