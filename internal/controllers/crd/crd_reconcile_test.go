package crd

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	compiler "kubeos.dev/kube/internal/crd"
)

// TestNonStructuralCondition: the NonStructuralSchema condition is upstream's — the
// violations of every version's schema and of preserveUnknownFields, or none at all.
func TestNonStructuralCondition(t *testing.T) {
	version := func(name, schema string) string {
		return `{"name":"` + name + `","served":true,"storage":` + map[bool]string{true: "true", false: "false"}[name == "v1"] +
			`,"schema":{"openAPIV3Schema":` + schema + `}}`
	}
	structural := `{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"}}}}}`
	tests := []struct {
		name     string
		versions []string
		preserve bool
		want     *apiextensionsv1.CustomResourceDefinitionCondition
	}{
		{name: "structural", versions: []string{version("v1", structural)}},
		{name: "no schema", versions: []string{`{"name":"v1","served":true,"storage":true}`}},
		{name: "untyped object", versions: []string{version("v1", `{"type":"object","properties":{"spec":{"properties":{"a":{"type":"string"}}}}}`)},
			want: &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionTrue, Reason: "Violations",
				Message: "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"}},
		{name: "second version and root type", versions: []string{version("v1", structural), version("v2", `{"properties":{"spec":{"type":"object"}}}`)},
			want: &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionTrue, Reason: "Violations",
				Message: "spec.versions[1].schema.openAPIV3Schema.type: Required value: must not be empty at the root"}},
		{name: "preserveUnknownFields", preserve: true, versions: []string{version("v1", structural)},
			want: &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionTrue, Reason: "Violations",
				Message: "spec.preserveUnknownFields: Invalid value: true: must be false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := `{"metadata":{"name":"things.example.com"},"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"things","kind":"Thing"},"versions":[`
			for i, v := range tt.versions {
				if i > 0 {
					raw += ","
				}
				raw += v
			}
			raw += `]}}`
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := json.Unmarshal([]byte(raw), crd); err != nil {
				t.Fatal(err)
			}
			crd.Spec.PreserveUnknownFields = tt.preserve
			stripped, err := compiler.Strip(crd)
			if err != nil {
				t.Fatal(err)
			}
			got := nonStructuralCondition(stripped)
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("condition %+v, want none", *got)
			case tt.want != nil && got == nil:
				t.Fatalf("no condition, want %+v", *tt.want)
			case tt.want != nil && *got != *tt.want:
				t.Fatalf("condition\n %+v\nwant\n %+v", *got, *tt.want)
			}
		})
	}
}
