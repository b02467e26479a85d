package crd

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"kubeos.dev/kube/internal/registry"
)

var (
	_ registry.Strategy           = (*version)(nil)
	_ registry.FieldChecker       = (*version)(nil)
	_ registry.UnknownFieldPruner = (*version)(nil)
)

// upstreamStrategy is the part of upstream's custom resource strategy Kube calls.
type upstreamStrategy interface {
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// schemaSet is a version's compiled schema: built on the first request that needs it.
type schemaSet struct {
	structural  *structuralschema.Structural
	strategy    upstreamStrategy
	hasDefaults bool
}

// compiled returns the version's schema set, compiling it on first use; nil if the schema
// cannot be compiled (Validate then reports why).
func (vs *version) compiled() *schemaSet {
	vs.once.Do(func() { vs.schema, vs.err = compileSchema(vs.c.crd, vs.c.kind, vs.v) })
	return vs.schema
}

func compileSchema(crd *Stripped, kind string, v *apiextensionsv1.CustomResourceDefinitionVersion) (*schemaSet, error) {
	validation, err := crd.Schema(v.Name)
	if err != nil {
		return nil, err
	}
	if validation == nil || validation.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("version %s has no schema", v.Name)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of %s: %w", v.Name, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not structural: %w", v.Name, err)
	}
	// Defaults must not bring in fields the schema prunes (upstream does the same).
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("the defaults of %s: %w", v.Name, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s: %w", v.Name, err)
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scale *apiextensions.CustomResourceSubresourceScale
	if sr := v.Subresources; sr != nil {
		if sr.Status != nil {
			status = &apiextensions.CustomResourceSubresourceStatus{}
			if st, ok := internal.OpenAPIV3Schema.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
					return nil, fmt.Errorf("the status schema of %s: %w", v.Name, err)
				}
			}
		}
		if sr.Scale != nil {
			scale = &apiextensions.CustomResourceSubresourceScale{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(sr.Scale, scale, nil); err != nil {
				return nil, err
			}
		}
	}
	gvk := apiextensionsv1.SchemeGroupVersion.WithKind(kind)
	gvk.Group, gvk.Version = crd.Spec.Group, v.Name
	st := customresource.NewStrategy(unstructuredscheme.NewUnstructuredObjectTyper(),
		crd.Spec.Scope == apiextensionsv1.NamespaceScoped, gvk, validator, statusValidator, s, status, scale, v.SelectableFields)
	return &schemaSet{structural: s, strategy: st, hasDefaults: hasDefaults(s)}, nil
}

func hasDefaults(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if s.Default.Object != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(&p) {
			return true
		}
	}
	if s.Items != nil && hasDefaults(s.Items) {
		return true
	}
	if s.AdditionalProperties != nil && hasDefaults(s.AdditionalProperties.Structural) {
		return true
	}
	return false
}

// defaultAndPrune applies the schema's defaults and drops unknown fields, in upstream's
// order (defaults cannot add unknown fields: they were pruned from the schema).
func (s *schemaSet) defaultAndPrune(obj *unstructured.Unstructured) {
	structuraldefaulting.Default(obj.Object, s.structural)
	structuralpruning.Prune(obj.Object, s.structural, true)
	pruneUnknownMetadata(obj.Object)
}

// PrepareForCreate defaults and prunes a new custom resource.
func (vs *version) PrepareForCreate(obj *unstructured.Unstructured) {
	if s := vs.compiled(); s != nil {
		s.defaultAndPrune(obj)
	}
}

// PrepareForUpdate defaults and prunes an updated custom resource.
func (vs *version) PrepareForUpdate(obj, _ *unstructured.Unstructured) {
	if s := vs.compiled(); s != nil {
		s.defaultAndPrune(obj)
	}
}

func (vs *version) schemaError() field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("the CustomResourceDefinition %s cannot be served: %v", vs.c.crd.Name, vs.err))}
}

// Validate checks metadata, the schema, list types, embedded resources, scale paths and
// the CEL rules (under the runtime cost budget) with upstream's strategy.
func (vs *version) Validate(obj *unstructured.Unstructured) field.ErrorList {
	s := vs.compiled()
	if s == nil {
		return vs.schemaError()
	}
	return s.strategy.Validate(context.Background(), obj)
}

// ValidateUpdate is Validate with transition rules (oldSelf) and ratcheting.
func (vs *version) ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	s := vs.compiled()
	if s == nil {
		return vs.schemaError()
	}
	return s.strategy.ValidateUpdate(context.Background(), obj, old)
}

// UnknownFields lists the fields of a request body the schema prunes, with upstream's
// messages (`unknown field "spec.foo"`).
func (vs *version) UnknownFields(data []byte) []error {
	var m map[string]any
	strictErrs, err := kjson.UnmarshalStrict(data, &m, kjson.DisallowUnknownFields)
	if err != nil {
		return []error{err}
	}
	if m == nil {
		return strictErrs
	}
	return append(strictErrs, vs.PruneUnknownFields(m)...)
}

// PruneUnknownFields drops the fields of a decoded body the schema prunes and lists them as
// UnknownFields does.
func (vs *version) PruneUnknownFields(obj map[string]any) []error {
	s := vs.compiled()
	if s == nil {
		return nil
	}
	// Metadata first, then the schema's fields: upstream's order.
	var errs []error
	for _, p := range pruneUnknownMetadata(obj) {
		errs = append(errs, &unknownField{path: p})
	}
	for _, p := range structuralpruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		errs = append(errs, &unknownField{path: p})
	}
	return errs
}

// unknownField is a pruned field; it is a kjson.FieldError so that the handler reports it
// under fieldValidation Strict and Warn.
type unknownField struct{ path string }

var _ kjson.FieldError = (*unknownField)(nil)

func (e *unknownField) Error() string         { return fmt.Sprintf("unknown field %q", e.path) }
func (e *unknownField) FieldPath() string     { return e.path }
func (e *unknownField) SetFieldPath(p string) { e.path = p }
