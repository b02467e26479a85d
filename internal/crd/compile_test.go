package crd

import (
	"context"
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const widgetCRD = `{"metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
	"names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
	"versions":[
	 {"name":"v1","served":true,"storage":true,"selectableFields":[{"jsonPath":".spec.name"}],"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
	   "x-kubernetes-validations":[{"rule":"self.size <= 10","message":"too big"}],
	   "properties":{"size":{"type":"integer","default":3},"name":{"type":"string"}}}}}}},
	 {"name":"v2","served":false,"storage":false,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`

func compileWidget(t *testing.T) []*version {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal([]byte(widgetCRD), crd); err != nil {
		t.Fatal(err)
	}
	stripped, err := Strip(crd)
	if err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Versions[0].Schema != nil {
		t.Fatal("Strip kept the decoded schema")
	}
	kinds := Compile(stripped, crd.Spec.Names, Options{}, false)
	if len(kinds) != 1 || kinds[0].Version != "v1" || kinds[0].Kind != "Widget" || !kinds[0].Namespaced || !kinds[0].Generation {
		t.Fatalf("kinds: %+v", kinds)
	}
	return []*version{kinds[0].Strategy.(*version)}
}

// TestCompileIsLazy: compiling a CRD builds no schema, validator, CEL program or
// selectable-field path; the first request does, once.
func TestCompileIsLazy(t *testing.T) {
	vs := compileWidget(t)[0]
	if vs.schema != nil || vs.oapi != nil || vs.c.conv != nil || vs.fields != nil {
		t.Fatal("Compile built the schema, OpenAPI, converter or selectable fields eagerly")
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "d"}, "spec": map[string]any{"name": "x", "extra": true}}}
	vs.PrepareForCreate(obj)
	if vs.schema == nil {
		t.Fatal("the first request did not compile the schema")
	}
	first := vs.schema
	if size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size"); size != 3 {
		t.Errorf("default not applied: %v", obj.Object)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "extra"); ok {
		t.Errorf("unknown field not pruned: %v", obj.Object)
	}
	if errs := vs.Validate(obj); len(errs) != 0 {
		t.Errorf("valid object refused: %v", errs)
	}
	unstructured.SetNestedField(obj.Object, int64(11), "spec", "size")
	if errs := vs.Validate(obj); len(errs) != 1 || errs[0].Detail != "too big" {
		t.Errorf("CEL rule: %v", errs)
	}
	if vs.schema != first {
		t.Error("the schema was compiled twice")
	}
	if errs := vs.UnknownFields([]byte(`{"spec":{"size":1,"bogus":2},"metadata":{"name":"w"}}`)); len(errs) != 1 || errs[0].Error() != `unknown field "spec.bogus"` {
		t.Errorf("UnknownFields: %v", errs)
	}
}

// TestNoneConversion: strategy None rewrites apiVersion without touching the stored object.
func TestNoneConversion(t *testing.T) {
	stored := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v0", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}
	out, err := noneConverter{}.convert(context.Background(), []*unstructured.Unstructured{stored}, "example.com/v1")
	if err != nil || out[0].GetAPIVersion() != "example.com/v1" || stored.GetAPIVersion() != "example.com/v0" {
		t.Fatalf("convert: %v %v (stored %v)", out, err, stored)
	}
}
