// Package crd runs the CustomResourceDefinition controllers of a Kube server, through the
// API like any client (a loopback informer on CRDs):
//
//   - registration: every server adds, replaces and removes the Kinds of each CRD in its own
//     registry (compiled by internal/crd, lazily), so discovery, OpenAPI and the REST
//     handler serve them;
//   - status: acceptedNames and NamesAccepted, decided name by name as upstream's naming
//     controller does (a name another CRD of the group or a built-in resource already has
//     is refused with reason PluralConflict, SingularConflict, ShortNamesConflict,
//     KindConflict or ListKindConflict and keeps its previously accepted value),
//     Established (True once every name is accepted, and then for good: a later conflict
//     does not take an established CRD offline; the Kinds are served under acceptedNames,
//     not spec.names), Terminating, and NonStructuralSchema (True with reason Violations when
//     preserveUnknownFields is set or a version's schema is not structural, which only a
//     CRD stored by an older server can be; such a CRD is still established and served, as
//     upstream does), all in one status write;
//   - deletion: a deleted CRD (held by the customresourcecleanup.apiextensions.k8s.io
//     finalizer) has every custom resource deleted, its Kinds and watch cache dropped, then
//     the finalizer removed;
//   - storage-version migration: while status.storedVersions names more than the storage
//     version, every object is rewritten (read and written back through the API, which
//     stores it in the storage version), then storedVersions is trimmed.
package crd
