package registry

import (
	"reflect"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Schemas of built-in kinds are generated from their Go types by reflection, the way
// kube-openapi's code generator does it at build time upstream:
//
//   - every named struct type (and every type that declares its own OpenAPI type, such as
//     metav1.Time, resource.Quantity, intstr.IntOrString) becomes a definition named by its
//     OpenAPIModelName (io.k8s.api.core.v1.ConfigMap) and is referred to by $ref; recursive
//     types (the CRD's JSONSchemaProps) therefore need no cut;
//   - field names, omitempty, inline and "-" follow the json tags; descriptions come from the
//     types' SwaggerDoc methods, or from apiextensions-apiserver's generated definitions for
//     the types without one (apiextensions, runtime), which also supply the exact required
//     lists and list-type extensions of those types;
//   - patchStrategy/patchMergeKey tags become x-kubernetes-patch-strategy/-merge-key;
//   - a field is required when its tag lacks omitempty and it is a struct (metadata,
//     involvedObject, roleRef, spec...), plus the required scalar and list fields listed in
//     requiredFields: kube-openapi reads +optional comments, which reflection cannot see, and
//     many optional scalars lack omitempty, so the rule errs towards optional — an
//     over-strict required list would make kubectl's client-side validation refuse good
//     objects;
//   - top-level kinds and their lists carry x-kubernetes-group-version-kind.
//
// OpenAPI v2 refers to definitions as #/definitions/<name> (Definitions), v3 as
// #/components/schemas/<name> (DefinitionsV3); v3 also spells a described $ref as
// allOf[$ref] and the string-or-number types as oneOf, as kube-apiserver's v3 documents do.

// Prefixes of $ref in the two OpenAPI versions.
const (
	RefPrefixV2 = "#/definitions/"
	RefPrefixV3 = "#/components/schemas/"
)

// Extension names.
const (
	extGVK                 = "x-kubernetes-group-version-kind"
	extPreserveUnknown     = "x-kubernetes-preserve-unknown-fields"
	extPatchStrategy       = "x-kubernetes-patch-strategy"
	extPatchMergeKey       = "x-kubernetes-patch-merge-key"
	extListType            = "x-kubernetes-list-type"
	extListMapKeys         = "x-kubernetes-list-map-keys"
	extMapType             = "x-kubernetes-map-type"
	extUnions              = "x-kubernetes-unions"
	extEmbeddedResource    = "x-kubernetes-embedded-resource"
	extIntOrString         = "x-kubernetes-int-or-string"
	extValidations         = "x-kubernetes-validations"
	extAssociativeListKeys = "x-kubernetes-associative-list-keys"
)

// copiedExtensions are the upstream property extensions carried over from generated
// definitions.
var copiedExtensions = []string{extListType, extListMapKeys, extMapType, extUnions, extEmbeddedResource,
	extIntOrString, extValidations, extPatchStrategy, extPatchMergeKey, extPreserveUnknown, extAssociativeListKeys}

type (
	modelNamer     interface{ OpenAPIModelName() string }
	swaggerDocer   interface{ SwaggerDoc() map[string]string }
	openAPITyper   interface{ OpenAPISchemaType() []string }
	openAPIFormat  interface{ OpenAPISchemaFormat() string }
	openAPIV3OneOf interface{ OpenAPIV3OneOfTypes() []string }
)

var (
	byteSlice    = reflect.TypeFor[[]byte]()
	rawExtension = reflect.TypeFor[runtime.RawExtension]()
)

// DefinitionName is the OpenAPI definition name of v's type (a value or a pointer to one):
// its OpenAPIModelName, or else the reversed-domain package path and the type name
// (k8s.io/api/core/v1.ConfigMap → io.k8s.api.core.v1.ConfigMap).
func DefinitionName(v any) string { return typeName(indirectType(reflect.TypeOf(v))) }

func indirectType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func typeName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(modelNamer); ok {
		if name := n.OpenAPIModelName(); name != "" {
			return name
		}
	}
	path := t.PkgPath()
	if path == "" {
		return t.Name()
	}
	segs := strings.Split(path, "/")
	domain := strings.Split(segs[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	return strings.Join(append(domain, segs[1:]...), ".") + "." + t.Name()
}

// upstreamDefs are the definitions apiextensions-apiserver generates at build time (meta,
// runtime, resource, apiextensions and autoscaling types), keyed by model name. Built once,
// on first schema generation.
var upstreamDefs = sync.OnceValue(func() map[string]common.OpenAPIDefinition {
	return openapi.GetOpenAPIDefinitions(func(name string) spec.Ref { return spec.MustCreateRef(RefPrefixV2 + name) })
})

// schemaGen turns Go types into definitions.
type schemaGen struct {
	refPrefix string
	v3        bool
	defs      map[string]spec.Schema
	seen      map[reflect.Type]string
}

func newSchemaGen(refPrefix string, v3 bool) *schemaGen {
	return &schemaGen{refPrefix: refPrefix, v3: v3, defs: map[string]spec.Schema{}, seen: map[reflect.Type]string{}}
}

// hasDefinition says t is described by a definition of its own rather than inline.
func hasDefinition(t reflect.Type) bool {
	if t.Name() == "" || t.PkgPath() == "" {
		return false
	}
	if t.Kind() == reflect.Struct {
		return true
	}
	_, ok := reflect.Zero(t).Interface().(openAPITyper)
	return ok
}

// define makes sure t has a definition and returns its name.
func (g *schemaGen) define(t reflect.Type) string {
	if name, ok := g.seen[t]; ok {
		return name
	}
	name := typeName(t)
	g.seen[t] = name // before building: recursive types refer to themselves
	g.defs[name] = g.build(t, name)
	return name
}

func (g *schemaGen) refTo(t reflect.Type) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(g.refPrefix + g.define(t))}}
}

// build computes the definition of the named type t.
func (g *schemaGen) build(t reflect.Type, name string) spec.Schema {
	up, hasUp := upstreamDefs()[name]
	docs := docsOf(t)
	var s spec.Schema
	zero := reflect.Zero(t).Interface()
	switch {
	case t == rawExtension:
		s.Type = spec.StringOrArray{"object"}
		s.AddExtension(extPreserveUnknown, true)
	case isOpenAPITyped(zero):
		types := zero.(openAPITyper).OpenAPISchemaType()
		if f, ok := zero.(openAPIFormat); ok {
			s.Format = f.OpenAPISchemaFormat()
		}
		if o, ok := zero.(openAPIV3OneOf); ok && g.v3 {
			for _, typ := range o.OpenAPIV3OneOfTypes() {
				s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
			}
		} else if len(types) > 0 {
			s.Type = spec.StringOrArray(types)
		}
	default:
		s.Type = spec.StringOrArray{"object"}
		s.Properties = map[string]spec.Schema{}
		g.fields(t, &s, docs)
		if hasUp {
			s.Required = append([]string(nil), up.Schema.Required...)
			for prop, ps := range up.Schema.Properties {
				cur, ok := s.Properties[prop]
				if !ok {
					continue
				}
				for _, ext := range copiedExtensions {
					if v, ok := ps.Extensions[ext]; ok {
						if _, set := cur.Extensions[ext]; !set {
							cur.AddExtension(ext, v)
						}
					}
				}
				s.Properties[prop] = cur
			}
			for _, ext := range copiedExtensions {
				if v, ok := up.Schema.Extensions[ext]; ok {
					s.AddExtension(ext, v)
				}
			}
		}
		if len(s.Required) == 0 {
			s.Required = nil
		}
	}
	s.Description = docs[""]
	if s.Description == "" && hasUp {
		s.Description = up.Schema.Description
	}
	return s
}

func isOpenAPITyped(v any) bool {
	_, ok := v.(openAPITyper)
	return ok
}

// docsOf is the field documentation of a struct type: its SwaggerDoc, or the descriptions
// of its generated upstream definition.
func docsOf(t reflect.Type) map[string]string {
	if d, ok := reflect.Zero(t).Interface().(swaggerDocer); ok {
		return d.SwaggerDoc()
	}
	if up, ok := upstreamDefs()[typeName(t)]; ok {
		docs := map[string]string{"": up.Schema.Description}
		for k, p := range up.Schema.Properties {
			docs[k] = p.Description
		}
		return docs
	}
	return nil
}

// fields adds the json fields of struct type t to s, following inlined structs.
func (g *schemaGen) fields(t reflect.Type, s *spec.Schema, docs map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		inline := strings.Contains(","+opts+",", ",inline,")
		if f.Anonymous && (inline || (!hasTag || name == "")) {
			et := indirectType(f.Type)
			if et.Kind() == reflect.Struct {
				g.fields(et, s, docsOf(et))
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ps := g.schemaFor(f.Type)
		desc := docs[name]
		if ps.Ref.String() != "" && desc != "" {
			if g.v3 {
				ps = spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{ps}}}
			}
		}
		ps.Description = desc
		if v := f.Tag.Get("patchStrategy"); v != "" {
			ps.AddExtension(extPatchStrategy, v)
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			ps.AddExtension(extPatchMergeKey, v)
		}
		s.Properties[name] = ps
		required, listed := requiredFields[typeName(t)+"."+name]
		if !listed {
			required = f.Type.Kind() == reflect.Struct &&
				!strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,")
		}
		if required {
			s.Required = append(s.Required, name)
		}
	}
}

// requiredFields are the required fields (Type.field) of the built-in kinds' types that
// the struct rule in fields cannot find, from the upstream OpenAPI documents.
var requiredFields = map[string]bool{
	"io.k8s.api.rbac.v1.Subject.kind": true, "io.k8s.api.rbac.v1.Subject.name": true,
	"io.k8s.api.rbac.v1.RoleRef.apiGroup": true, "io.k8s.api.rbac.v1.RoleRef.kind": true, "io.k8s.api.rbac.v1.RoleRef.name": true,
	"io.k8s.api.rbac.v1.PolicyRule.verbs":                                           true,
	"io.k8s.api.events.v1.Event.metadata":                                           false,
	"io.k8s.api.admissionregistration.v1.MutatingWebhook.name":                      true,
	"io.k8s.api.admissionregistration.v1.MutatingWebhook.sideEffects":               true,
	"io.k8s.api.admissionregistration.v1.MutatingWebhook.admissionReviewVersions":   true,
	"io.k8s.api.admissionregistration.v1.ValidatingWebhook.name":                    true,
	"io.k8s.api.admissionregistration.v1.ValidatingWebhook.sideEffects":             true,
	"io.k8s.api.admissionregistration.v1.ValidatingWebhook.admissionReviewVersions": true,
	"io.k8s.api.admissionregistration.v1.ServiceReference.namespace":                true,
	"io.k8s.api.admissionregistration.v1.ServiceReference.name":                     true,
}

// schemaFor is the schema of a value of type t: a $ref for named types, inline otherwise.
func (g *schemaGen) schemaFor(t reflect.Type) spec.Schema {
	if t == byteSlice || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && t.Name() == "") {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Format: "byte"}}
	}
	if t.Kind() == reflect.Pointer {
		return g.schemaFor(t.Elem())
	}
	if hasDefinition(t) {
		return g.refTo(t)
	}
	prim := func(typ, format string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
	}
	switch t.Kind() {
	case reflect.String:
		return prim("string", "")
	case reflect.Bool:
		return prim("boolean", "")
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return prim("integer", "int32")
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return prim("integer", "int64")
	case reflect.Float32:
		return prim("number", "float")
	case reflect.Float64:
		return prim("number", "double")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return prim("string", "byte")
		}
		items := g.schemaFor(t.Elem())
		s := prim("array", "")
		s.Items = &spec.SchemaOrArray{Schema: &items}
		return s
	case reflect.Map:
		vs := g.schemaFor(t.Elem())
		s := prim("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &vs}
		return s
	case reflect.Struct:
		s := prim("object", "")
		s.Properties = map[string]spec.Schema{}
		g.fields(t, &s, nil)
		if len(s.Required) == 0 {
			s.Required = nil
		}
		return s
	}
	s := prim("object", "")
	s.AddExtension(extPreserveUnknown, true)
	return s
}

// defRoots are the types every API document refers to besides the kinds.
var defRoots = []any{
	&metav1.Status{}, &metav1.DeleteOptions{}, &metav1.WatchEvent{}, &metav1.Patch{},
	&metav1.APIResourceList{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIVersions{},
}

// typedKind is a built-in kind's Go types and GVK, for the definitions.
type typedKind struct {
	group, version, kind string
	obj, list            runtime.Object
}

func gvkExtension(group, version, kind string) []any {
	return []any{map[string]any{"group": group, "version": version, "kind": kind}}
}

// buildDefinitions generates every definition reachable from the built-in kinds.
func buildDefinitions(refPrefix string, v3 bool) map[string]spec.Schema {
	g := newSchemaGen(refPrefix, v3)
	for _, tk := range builtinTypes() {
		for _, o := range []struct {
			obj  runtime.Object
			kind string
		}{{tk.obj, tk.kind}, {tk.list, tk.kind + "List"}} {
			if o.obj == nil {
				continue
			}
			name := g.define(indirectType(reflect.TypeOf(o.obj)))
			d := g.defs[name]
			d.AddExtension(extGVK, gvkExtension(tk.group, tk.version, o.kind))
			g.defs[name] = d
		}
	}
	for _, r := range defRoots {
		g.define(indirectType(reflect.TypeOf(r)))
	}
	return g.defs
}

// The definitions are built once per OpenAPI version. (Plain sync.Once rather than
// sync.OnceValue: the kinds' SchemaFuncs refer back to Definitions.)
var (
	defsV2Once, defsV3Once sync.Once
	defsV2Map, defsV3Map   map[string]spec.Schema
)

// Definitions is the OpenAPI v2 definition of every type reachable from the built-in kinds
// (with their lists, and metav1 Status, DeleteOptions, WatchEvent, Patch and the discovery
// types), keyed by definition name; $refs are #/definitions/<name>. Computed on first call;
// the map is shared and must not be modified.
func Definitions() map[string]spec.Schema {
	defsV2Once.Do(func() { defsV2Map = buildDefinitions(RefPrefixV2, false) })
	return defsV2Map
}

// DefinitionsV3 is Definitions for OpenAPI v3 documents: $refs are
// #/components/schemas/<name>.
func DefinitionsV3() map[string]spec.Schema {
	defsV3Once.Do(func() { defsV3Map = buildDefinitions(RefPrefixV3, true) })
	return defsV3Map
}

// SchemaOf is the OpenAPI v2 definition of v's type (a value or a pointer to one). Nested
// named types are $refs into Definitions when v is a built-in kind's type; for other types
// the referenced definitions are those DefinitionsOf returns.
func SchemaOf(v any) *spec.Schema {
	t := indirectType(reflect.TypeOf(v))
	name := typeName(t)
	if s, ok := Definitions()[name]; ok {
		return &s
	}
	defs := DefinitionsOf(RefPrefixV2, v)
	s := defs[name]
	return &s
}

// DefinitionsOf generates the definitions of the types of roots and of every type they
// reach, with $refs starting with refPrefix.
func DefinitionsOf(refPrefix string, roots ...any) map[string]spec.Schema {
	g := newSchemaGen(refPrefix, refPrefix == RefPrefixV3)
	for _, r := range roots {
		g.define(indirectType(reflect.TypeOf(r)))
	}
	return g.defs
}

// Reachable lists the names of the definitions reachable from roots through $refs in defs,
// roots included, so that a document can carry only the definitions it uses.
func Reachable(defs map[string]spec.Schema, refPrefix string, roots ...string) []string {
	seen := map[string]bool{}
	var out []string
	var visitName func(string)
	var visit func(*spec.Schema)
	visit = func(s *spec.Schema) {
		if s == nil {
			return
		}
		if r := s.Ref.String(); strings.HasPrefix(r, refPrefix) {
			visitName(strings.TrimPrefix(r, refPrefix))
		}
		for _, p := range s.Properties {
			visit(&p)
		}
		if s.AdditionalProperties != nil {
			visit(s.AdditionalProperties.Schema)
		}
		if s.Items != nil {
			visit(s.Items.Schema)
			for i := range s.Items.Schemas {
				visit(&s.Items.Schemas[i])
			}
		}
		for _, list := range [][]spec.Schema{s.AllOf, s.OneOf, s.AnyOf} {
			for i := range list {
				visit(&list[i])
			}
		}
	}
	visitName = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		out = append(out, name)
		if d, ok := defs[name]; ok {
			visit(&d)
		}
	}
	for _, r := range roots {
		visitName(r)
	}
	return out
}
