package crd

import (
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// coerce makes of a converted object what upstream makes of it after every conversion, with
// the schema of the version converted to: fields the schema does not know are pruned, nulls
// the schema neither allows nor defaults are dropped, and the apiVersion, kind and metadata
// of embedded resources are checked and metadata pruned to ObjectMeta. An embedded resource
// whose metadata is not ObjectMeta is an error.
//
// The object's own metadata is left as it is: a conversion keeps it (strategy None) or
// restores it from the object converted but for labels and annotations, which
// restoreMetadata checked (strategy Webhook).
func (s *schemaSet) coerce(obj *unstructured.Unstructured) error {
	structuralpruning.Prune(obj.Object, s.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, s.structural)
	if err := objectmeta.Coerce(nil, obj.Object, s.structural, false, false); err != nil {
		return err
	}
	return nil
}

// applyDefaults sets the schema's defaults in obj, if it has any. Defaults bring in no field
// the schema prunes (compileSchema pruned them).
func (s *schemaSet) applyDefaults(obj *unstructured.Unstructured) {
	if s.hasDefaults {
		structuraldefaulting.Default(obj.Object, s.structural)
	}
}
