package openapi

import (
	"maps"

	"k8s.io/apimachinery/pkg/runtime/schema"
	openapiaggregator "k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Remote is where the documents of the extension API servers come from (the aggregation
// layer, internal/apiserver/aggregator, downloads them).
type Remote interface {
	// OpenAPIGeneration changes whenever OpenAPIDocuments would answer differently.
	OpenAPIGeneration() uint64
	// OpenAPIDocuments are the remote group-versions' documents, the most preferred
	// APIService first. The caller does not change them.
	OpenAPIDocuments() []RemoteDocument
}

// RemoteDocument is what the extension server behind one APIService serves for its
// group-version.
type RemoteDocument struct {
	GroupVersion schema.GroupVersion
	// V2 holds the server's /openapi/v2 paths under /apis/<group>/<version>/ and the
	// definitions they use; nil when it serves none.
	V2 *spec.Swagger
	// V3 is the group-version's OpenAPI 3 document and V3Etag its version (a changed
	// document has a new one); nil when the server serves none.
	V3     *spec3.OpenAPI
	V3Etag string
}

// SetRemote adds the extension servers' documents to the ones this handler serves: their
// paths and definitions are merged into /openapi/v2 (after the registry's, which win a
// conflicting path; a conflicting definition is renamed, as kube-aggregator merges), and
// each remote group-version is listed in /openapi/v3 with the server's own document (it
// replaces a local one of the same group-version, as the proxy does). Call it before the
// handler serves.
func (h *Handler) SetRemote(r Remote) { h.remote = r }

func (h *Handler) remoteGeneration() uint64 {
	if h.remote == nil {
		return 0
	}
	return h.remote.OpenAPIGeneration()
}

// mergeV2 returns local with the remote documents' paths and definitions added, in the
// order given, through kube-openapi's merge (a path local already has is skipped; a
// definition of the same name but another schema is renamed). Neither local nor the remote
// documents are changed: the merge writes into copies of the maps it adds to, and of each
// definition whose group-version-kind list it may extend. A document that cannot be merged
// is left out.
func mergeV2(local *spec.Swagger, docs []RemoteDocument) *spec.Swagger {
	merged := *local
	copied := false
	for _, d := range docs {
		if d.V2 == nil || d.V2.Paths == nil || len(d.V2.Paths.Paths) == 0 {
			continue
		}
		if !copied {
			copied = true
			paths := &spec.Paths{}
			if local.Paths != nil {
				*paths = *local.Paths
			}
			paths.Paths = maps.Clone(paths.Paths)
			merged.Paths = paths
			merged.Definitions = maps.Clone(local.Definitions)
			merged.Parameters = maps.Clone(local.Parameters)
		}
		// A definition present on both sides, equal but for its
		// x-kubernetes-group-version-kind, gets the union of both lists written into its
		// extensions in place (into a nil map when it had none: made here).
		for name := range d.V2.Definitions {
			if def, ok := merged.Definitions[name]; ok {
				def.Extensions = maps.Clone(def.Extensions)
				if def.Extensions == nil {
					def.Extensions = spec.Extensions{}
				}
				merged.Definitions[name] = def
			}
		}
		mergeOne(&merged, d.V2)
	}
	return &merged
}

// mergeOne merges source into dest; a document the merge fails on, or panics on, is left
// out (what it added so far stays: definitions nothing refers to).
func mergeOne(dest, source *spec.Swagger) {
	defer func() { _ = recover() }()
	_ = openapiaggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(dest, source)
}

// remoteV3 is the remote group-versions' v3 documents by index key ("apis/<group>/<version>"),
// the first document of a key winning.
func remoteV3(docs []RemoteDocument) map[string]RemoteDocument {
	out := map[string]RemoteDocument{}
	for _, d := range docs {
		if d.V3 == nil {
			continue
		}
		key := indexKey(d.GroupVersion.Group, d.GroupVersion.Version)
		if _, dup := out[key]; !dup {
			out[key] = d
		}
	}
	return out
}
