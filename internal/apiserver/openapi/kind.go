package openapi

import (
	"strings"
	"sync"

	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

// Definition names used by every document.
const (
	defPrefix       = "#/definitions/"
	objectMetaName  = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	listMetaName    = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
	statusName      = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	deleteOptsName  = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	patchName       = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	watchEventName  = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"
	scaleName       = "io.k8s.api.autoscaling.v1.Scale"
	extGVK          = "x-kubernetes-group-version-kind"
	extAction       = "x-kubernetes-action"
	extIntOrString  = "x-kubernetes-int-or-string"
	extPreserveUnkn = "x-kubernetes-preserve-unknown-fields"
)

// refs caches parsed $refs by target: parsing one is costly, and a document has many.
var refs sync.Map // string → spec.Ref

func cachedRef(target string) spec.Ref {
	if r, ok := refs.Load(target); ok {
		return r.(spec.Ref)
	}
	r := spec.MustCreateRef(target)
	refs.Store(target, r)
	return r
}

func ref(name string) spec.Ref { return cachedRef(defPrefix + common.EscapeJsonPointer(name)) }

func refV3(name string) spec.Ref {
	return cachedRef("#/components/schemas/" + common.EscapeJsonPointer(name))
}

func refSchema(name, description string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name), Description: description}}
}

// refName returns the definition a schema $ref points to ("" if none or not local).
func refName(r spec.Ref) string {
	s := r.String()
	if !strings.HasPrefix(s, defPrefix) {
		return ""
	}
	return strings.ReplaceAll(strings.ReplaceAll(s[len(defPrefix):], "~1", "/"), "~0", "~")
}

// baseDefinitions are the generated apimachinery (and autoscaling/v1 Scale) definitions,
// built once.
var baseDefinitions = sync.OnceValue(func() map[string]spec.Schema {
	defs := generatedopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref { return ref(name) })
	out := make(map[string]spec.Schema, len(defs))
	for name, d := range defs {
		out[name] = d.Schema
	}
	return out
})

// fragment is the part of the documents that one kind contributes. Built once per Kind
// value; the registry replaces a Kind when it changes.
type fragment struct {
	gv string // index key: "api/v1" or "apis/<group>/<version>"
	// defs are the kind's own definitions (object and list) as the registry gives them
	// ($refs to #/definitions/); v2defs the same made valid for Swagger 2.0 (no nullable,
	// oneOf, anyOf, not); v3defs in OpenAPI v3 form.
	defs, v2defs, v3defs map[string]spec.Schema
	// refs are the definitions the kind's definitions and paths reference directly, outside
	// defs.
	refs []string
	// paths in OpenAPI v3 form, every parameter inline (kubectl looks for fieldValidation
	// among a PATCH operation's own parameters), and in v2 form, the common query
	// parameters as references to the document's parameters.
	paths   map[string]*spec3.Path
	v2paths map[string]spec.PathItem
}

func indexKey(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

// modelName derives a definition name as kube-apiserver does for custom resources:
// the group reversed, the version, the kind ("com.example.v1.Widget").
func modelName(group, version, kind string) string {
	if group == "" {
		return "io.k8s.api.core." + version + "." + kind
	}
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + kind
}

// definitionNames returns the object and list definition names of a kind.
func definitionNames(k *registry.Kind) (object, list string) {
	listKind := k.ListKind
	if listKind == "" {
		listKind = k.Kind + "List"
	}
	object = k.SchemaName
	if object == "" {
		return modelName(k.Group, k.Version, k.Kind), modelName(k.Group, k.Version, listKind)
	}
	if prefix, ok := strings.CutSuffix(object, "."+k.Kind); ok {
		return object, prefix + "." + listKind
	}
	return object, object + "List"
}

func gvkExtension(group, version, kind string) []any {
	return []any{map[string]any{"group": group, "version": version, "kind": kind}}
}

// objectDefinition is the definition of a kind's objects: its schema, with apiVersion, kind
// and metadata filled in when the schema leaves them out (custom resource schemas usually
// say only "metadata: {type: object}"), and the GVK extension.
func objectDefinition(k *registry.Kind) spec.Schema {
	return objectDefinitionOf(k, k.OpenAPISchema())
}

// objectDefinitionV2 is the object's definition in /openapi/v2 (Kind.SchemaV2Func).
func objectDefinitionV2(k *registry.Kind) spec.Schema {
	s, bare := k.SchemaV2Func()
	if bare && s != nil {
		return withGVK(*s, k.Group, k.Version, k.Kind)
	}
	return objectDefinitionOf(k, s)
}

func objectDefinitionOf(k *registry.Kind, s *spec.Schema) spec.Schema {
	var out spec.Schema
	if s != nil {
		out = *s
	} else {
		out.Type = spec.StringOrArray{"object"}
		out.Extensions = spec.Extensions{extPreserveUnkn: true}
	}
	props := make(map[string]spec.Schema, len(out.Properties)+3)
	for name, p := range out.Properties {
		props[name] = p
	}
	if _, ok := props["apiVersion"]; !ok {
		props["apiVersion"] = *spec.StringProperty().WithDescription(apiVersionDoc)
	}
	if _, ok := props["kind"]; !ok {
		props["kind"] = *spec.StringProperty().WithDescription(kindDoc)
	}
	if m, ok := props["metadata"]; !ok || (m.Ref.String() == "" && len(m.Properties) == 0) {
		props["metadata"] = refSchema(objectMetaName, metadataDoc)
	}
	out.Properties = props
	return withGVK(out, k.Group, k.Version, k.Kind)
}

// withGVK returns s with the GVK extension set.
func withGVK(s spec.Schema, group, version, kind string) spec.Schema {
	ext := make(spec.Extensions, len(s.Extensions)+1)
	for name, v := range s.Extensions {
		ext[name] = v
	}
	ext[extGVK] = gvkExtension(group, version, kind)
	s.Extensions = ext
	return s
}

func listDefinition(k *registry.Kind, objectName, listKind string) spec.Schema {
	s := spec.Schema{
		SchemaProps: spec.SchemaProps{
			Description: listKind + " is a list of " + k.Kind + ".",
			Type:        spec.StringOrArray{"object"},
			Required:    []string{"items"},
			Properties: map[string]spec.Schema{
				"apiVersion": *spec.StringProperty().WithDescription(apiVersionDoc),
				"kind":       *spec.StringProperty().WithDescription(kindDoc),
				"metadata":   refSchema(listMetaName, listMetaDoc),
				"items": {SchemaProps: spec.SchemaProps{
					Description: "List of " + k.Resource + ".",
					Type:        spec.StringOrArray{"array"},
					Items:       &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(objectName)}}},
				}},
			},
		},
	}
	return withGVK(s, k.Group, k.Version, listKind)
}

func buildFragment(k *registry.Kind) *fragment {
	objectName, listName := definitionNames(k)
	listKind := k.ListKind
	if listKind == "" {
		listKind = k.Kind + "List"
	}
	list := listDefinition(k, objectName, listKind)
	if k.NewTyped != nil {
		// A built-in list type has its own definition, with the upstream descriptions.
		if d, ok := definitionV2(listName); ok {
			list = withGVK(d, k.Group, k.Version, listKind)
		}
	}
	f := &fragment{
		gv: indexKey(k.Group, k.Version),
		defs: map[string]spec.Schema{
			objectName: objectDefinition(k),
			listName:   list,
		},
	}
	f.v2defs = make(map[string]spec.Schema, len(f.defs))
	f.v3defs = make(map[string]spec.Schema, len(f.defs))
	for name, d := range f.defs {
		f.v2defs[name] = *swagger2Schema(&d)
		f.v3defs[name] = *openapiconv.ConvertSchema(&d)
	}
	if k.SchemaV2Func != nil {
		d := objectDefinitionV2(k)
		f.v2defs[objectName] = *swagger2Schema(&d)
	}
	if k.NewTyped != nil {
		// Built-in types have a v3 form of their own (int-or-string as oneOf, described
		// $refs as allOf), as kube-apiserver publishes them.
		for name, kind := range map[string]string{objectName: k.Kind, listName: listKind} {
			if d, ok := definitionV3(name); ok {
				f.v3defs[name] = withGVK(d, k.Group, k.Version, kind)
			}
		}
	}
	inline := kindPaths(k, objectName, listName, false)
	f.v2paths = kindPaths(k, objectName, listName, true)
	f.paths = newV3Converter().paths(inline)

	seen := map[string]bool{}
	for _, d := range f.defs {
		collectRefs(&d, seen)
	}
	for _, p := range inline {
		collectPathRefs(&p, seen)
	}
	for name := range seen {
		if _, own := f.defs[name]; !own {
			f.refs = append(f.refs, name)
		}
	}
	return f
}

// swagger2Schema returns a copy of s without what Swagger 2.0 cannot express (and gnostic's
// protobuf conversion refuses): nullable, oneOf, anyOf, not, patternProperties and friends.
// Like kube-apiserver, int-or-string fields lose their type.
func swagger2Schema(s *spec.Schema) *spec.Schema {
	if s == nil {
		return nil
	}
	out := *s
	out.ID, out.Schema = "", ""
	out.Nullable = false
	out.OneOf, out.AnyOf, out.Not = nil, nil, nil
	out.PatternProperties, out.Dependencies, out.AdditionalItems, out.Definitions = nil, nil, nil, nil
	out.ExtraProps = nil
	if v, ok := s.Extensions[extIntOrString]; ok && v == true {
		out.Type = nil
		out.Format = ""
	}
	if s.Properties != nil {
		out.Properties = make(map[string]spec.Schema, len(s.Properties))
		for name, p := range s.Properties {
			out.Properties[name] = *swagger2Schema(&p)
		}
	}
	if s.Items != nil {
		items := &spec.SchemaOrArray{Schema: swagger2Schema(s.Items.Schema)}
		for i := range s.Items.Schemas {
			items.Schemas = append(items.Schemas, *swagger2Schema(&s.Items.Schemas[i]))
		}
		out.Items = items
	}
	if s.AllOf != nil {
		out.AllOf = make([]spec.Schema, len(s.AllOf))
		for i := range s.AllOf {
			out.AllOf[i] = *swagger2Schema(&s.AllOf[i])
		}
	}
	if s.AdditionalProperties != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{
			Allows: s.AdditionalProperties.Allows,
			Schema: swagger2Schema(s.AdditionalProperties.Schema),
		}
	}
	return &out
}

// collectRefs adds the local definitions s references to seen.
func collectRefs(s *spec.Schema, seen map[string]bool) {
	if s == nil {
		return
	}
	if name := refName(s.Ref); name != "" {
		seen[name] = true
	}
	for _, p := range s.Properties {
		collectRefs(&p, seen)
	}
	if s.Items != nil {
		collectRefs(s.Items.Schema, seen)
		for i := range s.Items.Schemas {
			collectRefs(&s.Items.Schemas[i], seen)
		}
	}
	for _, list := range [][]spec.Schema{s.AllOf, s.OneOf, s.AnyOf} {
		for i := range list {
			collectRefs(&list[i], seen)
		}
	}
	collectRefs(s.Not, seen)
	if s.AdditionalProperties != nil {
		collectRefs(s.AdditionalProperties.Schema, seen)
	}
}

func collectPathRefs(p *spec.PathItem, seen map[string]bool) {
	for _, op := range []*spec.Operation{p.Get, p.Put, p.Post, p.Delete, p.Patch} {
		if op == nil {
			continue
		}
		for _, prm := range op.Parameters {
			collectRefs(prm.Schema, seen)
		}
		if op.Responses != nil {
			for _, r := range op.Responses.StatusCodeResponses {
				collectRefs(r.Schema, seen)
			}
		}
	}
}

const (
	apiVersionDoc = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
	kindDoc       = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
	metadataDoc   = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
	listMetaDoc   = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
