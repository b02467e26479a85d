package crd

import (
	openapiv2 "k8s.io/apiextensions-apiserver/pkg/controller/openapi/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// openAPISchema is the version's schema as OpenAPI, built on first use (discovery of
// fields by kubectl explain, and the published documents).
func (vs *version) openAPISchema() *spec.Schema {
	vs.oapiOnce.Do(func() {
		if s := vs.compiled(); s != nil {
			vs.oapi = s.structural.ToKubeOpenAPI()
		}
	})
	return vs.oapi
}

// openAPISchemaV2 is the version's schema as /openapi/v2 publishes it, through upstream's
// own conversion (no junctors, no nullable, no properties or items under
// x-kubernetes-preserve-unknown-fields); a schema that preserves unknown fields at its root
// is published bare, as a plain object, as kube-apiserver does so that kubectl does not
// refuse the fields it does not know. Built when the document is, not kept.
func (vs *version) openAPISchemaV2() (*spec.Schema, bool) {
	s := vs.compiled()
	if s == nil {
		return nil, false
	}
	if s.structural.XPreserveUnknownFields {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}, true
	}
	return openapiv2.ToStructuralOpenAPIV2(s.structural).ToKubeOpenAPI(), false
}
