package lifecycle

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CRDOptions describe a managed kind's CustomResourceDefinition.
type CRDOptions struct {
	Group, Version, Kind string
	// Plural and Singular default to the lower-case kind (+ "s").
	Plural, Singular string
	ShortNames       []string
	Categories       []string
	Namespaced       bool
	// Spec is the schema of .spec (required).
	Spec apiextensionsv1.JSONSchemaProps
	// Status adds the kind's own status properties next to phase, observedGeneration and
	// conditions.
	Status map[string]apiextensionsv1.JSONSchemaProps
	// Columns are printed between Phase and Age (key fields).
	Columns []apiextensionsv1.CustomResourceColumnDefinition
	// Transitions guard status.phase on the server (CEL, default DefaultTransitions()).
	Transitions TransitionTable
}

// CRD builds the CustomResourceDefinition of a managed kind: the spec schema, a status with
// phase (guarded by the transition table's CEL rule, so the server refuses an illegal phase
// write from any client with 422), observedGeneration and conditions, the status
// subresource, and printer columns Phase, the key fields and Age.
func CRD(o CRDOptions) *apiextensionsv1.CustomResourceDefinition {
	if o.Singular == "" {
		o.Singular = strings.ToLower(o.Kind)
	}
	if o.Plural == "" {
		o.Plural = o.Singular + "s"
	}
	if o.Transitions == nil {
		o.Transitions = DefaultTransitions()
	}
	phases := make([]apiextensionsv1.JSON, len(Phases))
	for i, p := range Phases {
		phases[i] = apiextensionsv1.JSON{Raw: []byte(`"` + string(p) + `"`)}
	}
	status := map[string]apiextensionsv1.JSONSchemaProps{
		"phase": {Type: "string", Enum: phases, Description: "Derived from the conditions through the kind's transition table.",
			XValidations: apiextensionsv1.ValidationRules{o.Transitions.CELRule()}},
		"observedGeneration": {Type: "integer", Format: "int64"},
		"conditions": {Type: "array", XListType: ptr("map"), XListMapKeys: []string{"type"}, MaxItems: ptr[int64](16),
			Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &conditionSchema}},
	}
	for k, v := range o.Status {
		status[k] = v
	}
	scope := apiextensionsv1.ClusterScoped
	if o.Namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	cols := []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Phase", Type: "string", JSONPath: ".status.phase"}}
	cols = append(cols, o.Columns...)
	cols = append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"})
	spec := o.Spec
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Plural + "." + o.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: o.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: o.Plural, Singular: o.Singular, Kind: o.Kind,
				ListKind: o.Kind + "List", ShortNames: o.ShortNames, Categories: o.Categories},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: o.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"kind":       {Type: "string"},
						"metadata":   {Type: "object"},
						"spec":       spec,
						"status":     {Type: "object", Properties: status},
					},
				}},
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: cols,
			}},
		},
	}
}

var conditionSchema = apiextensionsv1.JSONSchemaProps{
	Type:     "object",
	Required: []string{"type", "status", "lastTransitionTime", "reason", "message"},
	Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"type":               {Type: "string", MaxLength: ptr[int64](316)},
		"status":             {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}}},
		"observedGeneration": {Type: "integer", Format: "int64", Minimum: ptr[float64](0)},
		"lastTransitionTime": {Type: "string", Format: "date-time"},
		"reason":             {Type: "string", MaxLength: ptr[int64](1024)},
		"message":            {Type: "string", MaxLength: ptr[int64](32768)},
	},
}
