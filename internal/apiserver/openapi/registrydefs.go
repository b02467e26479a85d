package openapi

import (
	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

// definitionV2 finds a shared definition in OpenAPI v2 form ($refs to #/definitions/):
// the registry's definitions of built-in types first, then the generated apimachinery ones.
func definitionV2(name string) (spec.Schema, bool) {
	if s, ok := registry.Definitions()[name]; ok {
		return s, true
	}
	s, ok := baseDefinitions()[name]
	return s, ok
}

// definitionV3 is definitionV2 in OpenAPI v3 form ($refs to #/components/schemas/).
func definitionV3(name string) (spec.Schema, bool) {
	if s, ok := registry.DefinitionsV3()[name]; ok {
		return s, true
	}
	if s, ok := baseDefinitions()[name]; ok {
		return *openapiconv.ConvertSchema(&s), true
	}
	return spec.Schema{}, false
}
