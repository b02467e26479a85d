package openapi

import (
	"fmt"
	"strings"
	"unicode"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

// queryParams are the query parameters the operations take, by name. The v2 document
// defines each once under "parameters" and references it; v3 documents inline them (kubectl
// looks for fieldValidation among a PATCH operation's own parameters).
var queryParams = map[string]spec.Parameter{}

func init() {
	add := func(name, typ, description string) {
		p := spec.Parameter{ParamProps: spec.ParamProps{Name: name, In: "query", Description: description}}
		p.Type = typ
		p.UniqueItems = true
		queryParams[name] = p
	}
	add("pretty", "string", "If 'true', then the output is pretty printed.")
	add("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\".")
	add("continue", "string", "The continue option should be set when retrieving more results from the server.")
	add("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything.")
	add("labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything.")
	add("limit", "integer", "limit is a maximum number of responses to return for a list call.")
	add("resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from.")
	add("resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls.")
	add("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`: the stream begins with synthetic events for the current state, then a bookmark.")
	add("timeoutSeconds", "integer", "Timeout for the list/watch call.")
	add("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.")
	add("dryRun", "string", "When present, indicates that modifications should not be persisted. Valid value: All.")
	add("fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes.")
	add("fieldValidation", "string", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.")
	add("force", "boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.")
	add("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted.")
	add("orphanDependents", "boolean", "Deprecated: please use the PropagationPolicy.")
	add("propagationPolicy", "string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground.")
	add("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.")
}

// v2ParamRef is the name of a query parameter in the v2 document's "parameters".
func v2ParamRef(name string) string { return "#/parameters/" + name }

// v2Parameters are the v2 document's shared parameters.
func v2Parameters() map[string]spec.Parameter { return queryParams }

var (
	listParams = []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
		"resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}
	writeParams  = []string{"dryRun", "fieldManager", "fieldValidation"}
	patchParams  = []string{"dryRun", "fieldManager", "fieldValidation", "force"}
	deleteParams = []string{"dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
		"orphanDependents", "propagationPolicy"}
	deleteCollectionParams = append(append([]string{}, deleteParams...), "continue", "fieldSelector",
		"labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds")
)

// Patch content types. Strategic merge is only for built-in kinds: a server that lists it
// for a custom resource makes kubectl send strategic merge patches it cannot apply.
var (
	crPatchTypes      = []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
	builtinPatchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
)

// pathBuilder makes the operations of one kind.
type pathBuilder struct {
	k                    *registry.Kind
	object, list         string // definition names
	idBase, tag          string // "CoreV1", "core_v1"
	produces, watchTypes []string
	patchTypes           []string
	refParams            bool
	resp                 map[string]*spec.Responses
}

func (b *pathBuilder) params(names ...string) []spec.Parameter {
	out := make([]spec.Parameter, 0, len(names))
	for _, name := range names {
		if b.refParams {
			out = append(out, spec.Parameter{Refable: spec.Refable{Ref: cachedRef(v2ParamRef(name))}})
		} else {
			out = append(out, queryParams[name])
		}
	}
	return out
}

// responses returns the responses of an operation returning def; operations that return
// the same share one value.
func (b *pathBuilder) responses(def string, codes ...int) *spec.Responses {
	key := fmt.Sprint(def, codes)
	if r, ok := b.resp[key]; ok {
		return r
	}
	r := responses(def, codes...)
	b.resp[key] = r
	return r
}

func bodyParam(def string) spec.Parameter {
	return spec.Parameter{ParamProps: spec.ParamProps{
		Name: "body", In: "body", Required: true,
		Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(def)}},
	}}
}

func responses(def string, codes ...int) *spec.Responses {
	r := &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
		401: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}},
	}}}
	for _, c := range codes {
		desc := map[int]string{200: "OK", 201: "Created", 202: "Accepted"}[c]
		r.StatusCodeResponses[c] = spec.Response{ResponseProps: spec.ResponseProps{
			Description: desc,
			Schema:      &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(def)}},
		}}
	}
	return r
}

// op makes one operation. gvk is the kind the operation is about (autoscaling/v1 Scale for
// the scale subresource).
func (b *pathBuilder) op(verb, idSuffix, action, description string, gvk map[string]any, produces, consumes []string,
	params []spec.Parameter, resp *spec.Responses) *spec.Operation {
	o := &spec.Operation{OperationProps: spec.OperationProps{
		Description: description,
		Consumes:    consumes,
		Produces:    produces,
		Schemes:     []string{"https"},
		Tags:        []string{b.tag},
		ID:          verb + b.idBase + idSuffix,
		Parameters:  params,
		Responses:   resp,
	}}
	o.Extensions = spec.Extensions{extAction: action, extGVK: gvk}
	return o
}

func pathParam(name, description string) spec.Parameter {
	p := spec.Parameter{ParamProps: spec.ParamProps{Name: name, In: "path", Required: true, Description: description}}
	p.Type = "string"
	p.UniqueItems = true
	return p
}

// kindPaths returns the paths of a kind's operations, as kube-apiserver publishes them.
func kindPaths(k *registry.Kind, object, list string, refParams bool) map[string]spec.PathItem {
	b := &pathBuilder{k: k, object: object, list: list, refParams: refParams, resp: map[string]*spec.Responses{}}
	b.idBase, b.tag = operationNames(k.Group, k.Version)
	b.produces = []string{"application/json", "application/yaml"}
	b.patchTypes = crPatchTypes
	if k.NewTyped != nil {
		b.produces = append(b.produces, "application/vnd.kubernetes.protobuf")
		b.patchTypes = builtinPatchTypes
	}
	b.watchTypes = append(append([]string{}, b.produces...), "application/json;stream=watch")
	if k.NewTyped != nil {
		b.watchTypes = append(b.watchTypes, "application/vnd.kubernetes.protobuf;stream=watch")
	}

	root := "/apis/" + k.Group + "/" + k.Version
	if k.Group == "" {
		root = "/api/" + k.Version
	}
	gvk := map[string]any{"group": k.Group, "version": k.Version, "kind": k.Kind}
	scope, collection := "", root+"/"+k.Resource
	var scopeParams []spec.Parameter
	if k.Namespaced {
		scope = "Namespaced"
		collection = root + "/namespaces/{namespace}/" + k.Resource
		scopeParams = []spec.Parameter{pathParam("namespace", "object name and auth scope, such as for teams and projects")}
	}
	item := collection + "/{name}"
	nameParam := pathParam("name", "name of the "+k.Kind)
	pretty := b.params("pretty")
	kind := k.Kind
	out := map[string]spec.PathItem{}

	// Collection: list, create, deletecollection.
	var coll spec.PathItem
	coll.Parameters = append(append([]spec.Parameter{}, scopeParams...), pretty...)
	if k.Supports("list") {
		coll.Get = b.op("list", scope+kind, "list", "list or watch objects of kind "+kind, gvk, b.watchTypes, []string{"*/*"},
			b.params(listParams...), b.responses(list, 200))
	}
	if k.Supports("create") {
		coll.Post = b.op("create", scope+kind, "post", "create a "+kind, gvk, b.produces, []string{"*/*"},
			append([]spec.Parameter{bodyParam(object)}, b.params(writeParams...)...), b.responses(object, 200, 201, 202))
	}
	if k.Supports("deletecollection") {
		coll.Delete = b.op("delete", "Collection"+scope+kind, "deletecollection", "delete collection of "+kind, gvk, b.produces, []string{"*/*"},
			append([]spec.Parameter{bodyParam(deleteOptsName)}, b.params(deleteCollectionParams...)...), b.responses(statusName, 200))
	}
	if coll.Get != nil || coll.Post != nil || coll.Delete != nil {
		out[collection] = coll
	}

	// Item: read, replace, patch, delete.
	var one spec.PathItem
	one.Parameters = append(append([]spec.Parameter{nameParam}, scopeParams...), pretty...)
	if k.Supports("get") {
		one.Get = b.op("read", scope+kind, "get", "read the specified "+kind, gvk, b.produces, []string{"*/*"},
			nil, b.responses(object, 200))
	}
	if k.Supports("update") {
		one.Put = b.op("replace", scope+kind, "put", "replace the specified "+kind, gvk, b.produces, []string{"*/*"},
			append([]spec.Parameter{bodyParam(object)}, b.params(writeParams...)...), b.responses(object, 200, 201))
	}
	if k.Supports("patch") {
		one.Patch = b.op("patch", scope+kind, "patch", "partially update the specified "+kind, gvk, b.produces, b.patchTypes,
			append([]spec.Parameter{bodyParam(patchName)}, b.params(patchParams...)...), b.responses(object, 200, 201))
	}
	if k.Supports("delete") {
		one.Delete = b.op("delete", scope+kind, "delete", "delete a "+kind, gvk, b.produces, []string{"*/*"},
			append([]spec.Parameter{bodyParam(deleteOptsName)}, b.params(deleteParams...)...), b.responses(statusName, 200, 202))
	}
	if one.Get != nil || one.Put != nil || one.Patch != nil || one.Delete != nil {
		out[item] = one
	}

	if k.Supports("list") && k.Namespaced {
		out[root+"/"+k.Resource] = spec.PathItem{PathItemProps: spec.PathItemProps{
			Parameters: b.params(append([]string{"pretty"}, listParams...)...),
			Get: b.op("list", kind+"ForAllNamespaces", "list", "list or watch objects of kind "+kind, gvk, b.watchTypes, []string{"*/*"},
				nil, b.responses(list, 200)),
		}}
	}
	if k.Supports("watch") {
		watchParams := b.params(append([]string{"pretty"}, listParams...)...)
		watchRoot := root + "/watch"
		if k.Namespaced {
			watchRoot += "/namespaces/{namespace}"
			out[root+"/watch/"+k.Resource] = spec.PathItem{PathItemProps: spec.PathItemProps{
				Parameters: watchParams,
				Get: b.op("watch", kind+"ListForAllNamespaces", "watchlist", "watch individual changes to a list of "+kind+". deprecated: use the 'watch' parameter with a list operation instead.",
					gvk, b.watchTypes, []string{"*/*"}, nil, b.responses(watchEventName, 200)),
			}}
		}
		out[watchRoot+"/"+k.Resource] = spec.PathItem{PathItemProps: spec.PathItemProps{
			Parameters: append(append([]spec.Parameter{}, scopeParams...), watchParams...),
			Get: b.op("watch", scope+kind+"List", "watchlist", "watch individual changes to a list of "+kind+". deprecated: use the 'watch' parameter with a list operation instead.",
				gvk, b.watchTypes, []string{"*/*"}, nil, b.responses(watchEventName, 200)),
		}}
		out[watchRoot+"/"+k.Resource+"/{name}"] = spec.PathItem{PathItemProps: spec.PathItemProps{
			Parameters: append(append([]spec.Parameter{nameParam}, scopeParams...), watchParams...),
			Get: b.op("watch", scope+kind, "watch", "watch changes to an object of kind "+kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
				gvk, b.watchTypes, []string{"*/*"}, nil, b.responses(watchEventName, 200)),
		}}
	}

	// Subresources: the same verbs on status as on the object, with scale in autoscaling/v1.
	sub := func(name, def string, gvk map[string]any, idSuffix string) {
		var p spec.PathItem
		p.Parameters = append(append([]spec.Parameter{pathParam("name", "name of the "+idSuffix)}, scopeParams...), pretty...)
		p.Get = b.op("read", scope+kind+idSuffix, "get", "read "+name+" of the specified "+kind, gvk, b.produces, []string{"*/*"},
			nil, b.responses(def, 200))
		p.Put = b.op("replace", scope+kind+idSuffix, "put", "replace "+name+" of the specified "+kind, gvk, b.produces, []string{"*/*"},
			append([]spec.Parameter{bodyParam(def)}, b.params(writeParams...)...), b.responses(def, 200, 201))
		p.Patch = b.op("patch", scope+kind+idSuffix, "patch", "partially update "+name+" of the specified "+kind, gvk, b.produces, b.patchTypes,
			append([]spec.Parameter{bodyParam(patchName)}, b.params(patchParams...)...), b.responses(def, 200, 201))
		out[item+"/"+name] = p
	}
	if k.Status {
		sub("status", object, gvk, "Status")
	}
	if k.Scale != nil {
		sub("scale", scaleName, map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}, "Scale")
	}
	return out
}

// operationNames returns the operation id infix and the tag of a group version, as
// kube-apiserver names them: "CoreV1"/"core_v1", "AppsV1"/"apps_v1",
// "RbacAuthorizationV1"/"rbacAuthorization_v1", "StableExampleComV1"/"stableExampleCom_v1".
func operationNames(group, version string) (idBase, tag string) {
	g := strings.TrimSuffix(group, ".k8s.io")
	if g == "" {
		g = "core"
	}
	var id strings.Builder
	for _, part := range strings.FieldsFunc(g, func(r rune) bool { return r == '.' || r == '-' }) {
		id.WriteString(upperFirst(part))
	}
	pascal := id.String()
	return pascal + upperFirst(version), lowerFirst(pascal) + "_" + version
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}
