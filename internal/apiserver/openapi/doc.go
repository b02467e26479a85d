// Package openapi serves the OpenAPI documents of the API, built from the type registry:
// /openapi/v2 (one Swagger 2.0 document, JSON or gnostic protobuf as kubectl 1.27 asks) and
// /openapi/v3 (an index of group-versions with content hashes, and one OpenAPI 3 document
// per group-version under /openapi/v3/api/v1 and /openapi/v3/apis/<group>/<version>).
//
// For each kind the documents carry a definition (Kind.SchemaName, or a name derived from the
// group, version and kind) with the x-kubernetes-group-version-kind extension that kubectl
// explain and client-side validation look for, its list definition, and the paths of the
// resource's operations with their query parameters (fieldValidation on PATCH tells kubectl
// the server validates fields itself). Definitions referenced by the kinds' schemas come from
// the registry's definitions or from the generated apimachinery definitions (ObjectMeta,
// ListMeta, Status, DeleteOptions, Patch, WatchEvent, autoscaling/v1 Scale).
//
// The documents are rebuilt when the registry's generation changes, on the first request
// after the change; each kind's part is built once and reused while the kind is unchanged,
// and serialisation (JSON, protobuf, hashes) is lazy per format through kube-openapi's
// handler and handler3 services.
//
// With SetRemote, the extension API servers' documents (a Remote: the aggregation layer,
// internal/apiserver/aggregator) are served too: their paths and definitions merged into
// /openapi/v2 with kube-openapi's aggregator package, as kube-aggregator merges them (the
// registry's paths win; a definition of the same name but another schema is renamed), and
// each remote group-version's own OpenAPI 3 document listed in /openapi/v3. A change of the
// remote documents rebuilds only the merge, not the registry's part.
package openapi
