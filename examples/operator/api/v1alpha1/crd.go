package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Transitions is Greeting's transition table, narrower than lifecycle.DefaultTransitions: a
// Greeting fails only while it is being reconciled (never straight from Pending or Active —
// the engine steps through Reconciling), and a failed one is retried through Reconciling.
//
//	Pending → Reconciling → Active → Reconciling
//	Reconciling → Failed → Reconciling
//	any (but Deleting) → Deleting
func Transitions() lifecycle.TransitionTable {
	return lifecycle.TransitionTable{
		lifecycle.PhasePending:     {lifecycle.PhaseReconciling},
		lifecycle.PhaseReconciling: {lifecycle.PhaseActive, lifecycle.PhaseFailed},
		lifecycle.PhaseActive:      {lifecycle.PhaseReconciling},
		lifecycle.PhaseFailed:      {lifecycle.PhaseReconciling},
		lifecycle.AnyPhase:         {lifecycle.PhaseDeleting},
	}
}

// CRD is Greeting's CustomResourceDefinition (greetings.example.kubeos.dev): the spec schema,
// the lifecycle status with the transition rule of Transitions, printer columns.
func CRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](1)}
	return lifecycle.CRD(lifecycle.CRDOptions{
		Group: GroupVersion.Group, Version: GroupVersion.Version, Kind: "Greeting",
		ShortNames: []string{"greet"}, Categories: []string{"kubeos"}, Namespaced: true,
		Spec: apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"message", "to"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"message": str, "to": str, "credential": str}},
		Status: map[string]apiextensionsv1.JSONSchemaProps{"configMap": {Type: "string"}, "text": {Type: "string"}},
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Text", Type: "string", JSONPath: ".status.text"},
			{Name: "Credential", Type: "string", JSONPath: ".spec.credential"},
		},
		Transitions: Transitions(),
	})
}

func ptr[T any](v T) *T { return &v }
