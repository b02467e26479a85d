package rest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"kubeos.dev/kube/internal/registry"
)

// Field management, as kube-apiserver does it with apimachinery's managedfields
// (structured-merge-diff): every create, update and patch records in metadata.managedFields
// which manager set which fields, and server-side apply merges the applied configuration by
// those owners — fields the manager no longer applies are removed, and changing a field
// another manager owns is a 409 conflict unless forced.
//
// Each Kind gets one field manager per subresource ("" and "status"; the scale subresource
// one for its autoscaling/v1 Scale objects, whose ownership upstream's ScaleHandler maps to
// and from the parent's), built on its first write and cached with the Kind
// (registry.Kind.Derived). Its type converter comes from the
// Kind's OpenAPI schema, so list types and map keys (x-kubernetes-list-type, patch merge
// keys) decide how lists merge; a kind without a schema gets the deduced converter (maps
// merge by key, lists are atomic).

// scaleGVK is the kind the scale subresource reads and writes.
var scaleGVK = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// scaleFieldManager is the field manager of the kind's Scale objects (the scale
// subresource), nil if none could be built.
func (c *call) scaleFieldManager() *managedfields.FieldManager {
	e := c.kind.Derived(fieldManagerKey("scale"), func() any {
		tc, err := builtinTypeConverter()
		if err != nil || !knowsGVK(tc, scaleGVK) {
			tc = managedfields.NewDeducedTypeConverter()
		}
		conv := &kindConvertor{reg: c.h.reg, kind: c.kind}
		fm, err := managedfields.NewDefaultFieldManager(tc, conv, noDefaults{}, conv, scaleGVK, scaleGVK.GroupVersion(), "scale", nil)
		if err != nil {
			return &fieldManagerEntry{}
		}
		return &fieldManagerEntry{fm: fm}
	})
	return e.(*fieldManagerEntry).fm
}

// fieldManagerKey is the Derived key of a Kind's field manager for one subresource.
type fieldManagerKey string

// fieldManagerEntry is a built field manager; fm is nil when none could be built (the
// writes then leave managedFields as they are).
type fieldManagerEntry struct{ fm *managedfields.FieldManager }

// fieldManager is the field manager of the request's kind and subresource; nil for the
// scale subresource (scaleFieldManager serves it) and for finalize, whose writes are not
// tracked.
func (c *call) fieldManager() *managedfields.FieldManager {
	sub := c.info.Subresource
	if sub != "" && sub != "status" {
		return nil
	}
	e := c.kind.Derived(fieldManagerKey(sub), func() any { return c.h.newFieldManager(c.kind, sub) })
	return e.(*fieldManagerEntry).fm
}

func (h *Handler) newFieldManager(k *registry.Kind, sub string) *fieldManagerEntry {
	conv := &kindConvertor{reg: h.reg, kind: k}
	version := fieldpath.APIVersion(k.APIVersion())
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	switch {
	case sub == "status":
		// A status write changes the status only.
		reset = map[fieldpath.APIVersion]fieldpath.Filter{version: fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("status"))}
	case k.Status:
		// A write of the whole object leaves the status as it is.
		reset = map[fieldpath.APIVersion]fieldpath.Filter{version: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))}
	}
	tc := typeConverterFor(h.reg, k)
	var fm *managedfields.FieldManager
	var err error
	if k.NewTyped != nil {
		fm, err = managedfields.NewDefaultFieldManager(tc, conv, noDefaults{}, conv, k.GVK(), k.GroupVersion(), sub, reset)
	} else {
		fm, err = managedfields.NewDefaultCRDFieldManager(tc, conv, noDefaults{}, conv, k.GVK(), k.GroupVersion(), sub, reset)
	}
	if err != nil {
		if h.log != nil {
			h.log.Error("no field manager: managedFields of this kind are not maintained", "kind", k.GVK().String(), "err", err)
		}
		return &fieldManagerEntry{}
	}
	return &fieldManagerEntry{fm: fm}
}

// builtinTypeConverter knows every built-in kind, from the registry's OpenAPI definitions.
var builtinTypeConverter = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	defs := registry.Definitions()
	m := make(map[string]*spec.Schema, len(defs))
	for name := range defs {
		s := defs[name]
		m[name] = &s
	}
	return managedfields.NewTypeConverter(m, false)
})

// objectMetaRef is the definition custom resources' metadata refers to.
const objectMetaRef = registry.RefPrefixV2 + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// typeConverterFor builds the type converter of k: the built-in one for built-in kinds,
// one from the schemas of every served version of the kind (with ObjectMeta and what it
// refers to) for the others — managedFields record the version each manager wrote in, and
// the field manager types the object in those versions too — and the deduced one when
// neither knows the kind.
func typeConverterFor(reg *registry.Registry, k *registry.Kind) managedfields.TypeConverter {
	if k.NewTyped != nil {
		if tc, err := builtinTypeConverter(); err == nil && knows(tc, k) {
			return tc
		}
	}
	if s := k.OpenAPISchema(); s != nil {
		versions := []*registry.Kind{k}
		for _, v := range reg.GroupVersions()[k.Group] {
			if o, ok := reg.Lookup(schema.GroupVersionResource{Group: k.Group, Version: v, Resource: k.Resource}); ok && v != k.Version && o.Kind == k.Kind {
				versions = append(versions, o)
			}
		}
		defs := map[string]*spec.Schema{}
		for _, v := range versions {
			vs := v.OpenAPISchema()
			if vs == nil {
				continue
			}
			root := rootSchema(v, vs)
			for name, d := range referenced(root) {
				defs[name] = d
			}
			defs["kube.custom."+v.GVK().String()] = root
		}
		preserve, _ := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields")
		if tc, err := managedfields.NewTypeConverter(defs, preserve); err == nil && knows(tc, k) {
			return tc
		}
	}
	return managedfields.NewDeducedTypeConverter()
}

// rootSchema is s, the schema of k's objects, as a definition of the type converter: with
// ObjectMeta's fields for metadata, apiVersion and kind, and k's GVK.
func rootSchema(k *registry.Kind, s *spec.Schema) *spec.Schema {
	root := *s
	root.Properties = make(map[string]spec.Schema, len(s.Properties)+3)
	for n, p := range s.Properties {
		root.Properties[n] = p
	}
	// Whatever the schema says of metadata (a CRD may constrain name), its fields are
	// ObjectMeta's.
	root.Properties["metadata"] = *spec.RefSchema(objectMetaRef)
	for _, n := range []string{"apiVersion", "kind"} {
		if _, ok := root.Properties[n]; !ok {
			root.Properties[n] = *spec.StringProperty()
		}
	}
	root.Extensions = spec.Extensions{}
	for n, v := range s.Extensions {
		root.Extensions[n] = v
	}
	root.Extensions["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": k.Group, "version": k.Version, "kind": k.Kind}}
	return &root
}

// knows says whether tc has a type for k's objects.
func knows(tc managedfields.TypeConverter, k *registry.Kind) bool { return knowsGVK(tc, k.GVK()) }

func knowsGVK(tc managedfields.TypeConverter, gvk schema.GroupVersionKind) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	_, err := tc.ObjectToTyped(u)
	return err == nil
}

// referenced collects the registry definitions s refers to, directly or not, so that a
// custom kind's converter parses a handful of definitions rather than all of them.
func referenced(s *spec.Schema) map[string]*spec.Schema {
	defs := registry.Definitions()
	out := map[string]*spec.Schema{}
	var walk func(s *spec.Schema)
	walk = func(s *spec.Schema) {
		if s == nil {
			return
		}
		if ref := s.Ref.String(); ref != "" {
			name := strings.TrimPrefix(ref, registry.RefPrefixV2)
			if _, seen := out[name]; !seen {
				if d, ok := defs[name]; ok {
					out[name] = &d
					walk(&d)
				}
			}
		}
		for n := range s.Properties {
			p := s.Properties[n]
			walk(&p)
		}
		if s.Items != nil {
			walk(s.Items.Schema)
			for i := range s.Items.Schemas {
				walk(&s.Items.Schemas[i])
			}
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
		for _, list := range [][]spec.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for i := range list {
				walk(&list[i])
			}
		}
	}
	walk(s)
	return out
}

// noDefaults is the field managers' defaulter: the kinds' strategies default objects later
// in the write path, as for any other write.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// kindConvertor converts objects between the served versions of a kind for the field
// manager (managedFields record the version each manager wrote in), through the storage
// version as every read and write does; it also creates the field manager's empty objects.
type kindConvertor struct {
	reg  *registry.Registry
	kind *registry.Kind
}

func (c *kindConvertor) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func (c *kindConvertor) Convert(in, out, _ any) error {
	return fmt.Errorf("field manager: conversion of %T into %T is not supported", in, out)
}

func (c *kindConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (c *kindConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("field manager: cannot convert %T", in)
	}
	from := u.GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok {
		return nil, runtime.NewNotRegisteredErrForTarget("kube", reflect.TypeOf(in), target)
	}
	if to.GroupVersion() == from.GroupVersion() {
		// Not copied: the field manager only reads the objects it converts, or converts
		// objects it has just built (kube-apiserver hands it runtime.UnsafeObjectConvertor,
		// which does not copy either). Two copies per write were 4 % of an update's
		// allocations.
		return u, nil
	}
	src, okSrc := c.reg.Lookup(from.GroupVersion().WithResource(c.kind.Resource))
	dst, okDst := c.reg.Lookup(to.GroupVersion().WithResource(c.kind.Resource))
	if !okSrc || !okDst {
		// A version no longer served: the managers that wrote in it are dropped.
		return nil, runtime.NewNotRegisteredErrForKind("kube", to)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj := u.DeepCopy()
	if src.ToStorage != nil {
		var err error
		if obj, err = src.ToStorage(ctx, obj); err != nil {
			return nil, err
		}
	}
	if dst.FromStorage == nil {
		obj.SetAPIVersion(to.GroupVersion().String())
		return obj, nil
	}
	objs, err := dst.FromStorage(ctx, []*unstructured.Unstructured{obj})
	if err != nil {
		return nil, err
	}
	return objs[0].DeepCopy(), nil
}

// managerOf is the field manager's name for a write: the fieldManager parameter, or else
// the client's User-Agent up to its first "/", as kube-apiserver names them.
func managerOf(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	name, _, _ := strings.Cut(userAgent, "/")
	name = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, name)
	if len(name) > 128 {
		name = name[:128]
	}
	return name
}

// validateFieldManager checks the fieldManager parameter as kube-apiserver does.
func validateFieldManager(name string) field.ErrorList {
	p := field.NewPath("fieldManager")
	if len(name) > 128 {
		return field.ErrorList{field.TooLong(p, "", 128)}
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return field.ErrorList{field.Invalid(p, name, "must only contain printable characters")}
		}
	}
	return nil
}
