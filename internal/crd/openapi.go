package crd

import (
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
