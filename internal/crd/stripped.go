package crd

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/tools/cache"

	"kubeos.dev/kube/internal/deflate"
)

// Stripped is a CRD as the CRD controller keeps it: without its annotations (kubectl's
// last-applied configuration repeats the whole CRD) and managedFields (which name every
// field of the schema), and with its versions' schemas held as
// compressed JSON rather than decoded. A decoded schema costs about four times its JSON and
// its JSON three to four times the compressed form, and nothing needs it until a custom
// resource of the version is served; the Kinds decode it then, once.
//
// A Stripped CRD must never be written back to the API server: its spec is incomplete.
type Stripped struct {
	*apiextensionsv1.CustomResourceDefinition
	// schemas holds spec.versions[].schema as deflated JSON, by version name.
	schemas map[string][]byte
}

// Strip turns crd into its stripped form. crd is changed (its schemas and annotations are
// dropped) and kept: pass a copy if the caller still needs it whole.
func Strip(crd *apiextensionsv1.CustomResourceDefinition) (*Stripped, error) {
	s := &Stripped{CustomResourceDefinition: crd}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil {
			continue
		}
		data, err := json.Marshal(v.Schema)
		if err != nil {
			return nil, fmt.Errorf("CRD %s version %s: encoding the schema: %w", crd.Name, v.Name, err)
		}
		if s.schemas == nil {
			s.schemas = make(map[string][]byte, len(crd.Spec.Versions))
		}
		s.schemas[v.Name] = deflate.Compress(data)
		v.Schema = nil
	}
	crd.Annotations = nil
	crd.ManagedFields = nil
	return s, nil
}

// Schema decodes the schema of one version; nil if the version has none.
func (s *Stripped) Schema(version string) (*apiextensionsv1.CustomResourceValidation, error) {
	data, ok := s.schemas[version]
	if !ok {
		return nil, nil
	}
	raw, err := deflate.Decompress(data)
	if err != nil {
		return nil, fmt.Errorf("CRD %s version %s: decompressing the schema: %w", s.Name, version, err)
	}
	v := &apiextensionsv1.CustomResourceValidation{}
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("CRD %s version %s: decoding the schema: %w", s.Name, version, err)
	}
	return v, nil
}

// StripTransform is an informer transform (cache.SharedInformer.SetTransform) that keeps
// CRDs stripped. Objects other than CRDs, and CRDs already stripped, pass unchanged.
func StripTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		return Strip(o)
	case cache.DeletedFinalStateUnknown:
		if crd, ok := o.Obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			s, err := Strip(crd)
			if err != nil {
				return nil, err
			}
			o.Obj = s
		}
		return o, nil
	}
	return obj, nil
}
