// Package crd compiles a CustomResourceDefinition into the registry Kinds that serve its
// custom resources, one per served version.
//
// Compile is O(1) in the size of the schema: it copies names, scope and subresource paths
// into Kinds and wires closures. Everything costly — the structural schema, the OpenAPI
// validator, CEL programs, the OpenAPI document of the kind, printer-column JSONPaths, the
// conversion webhook's HTTP client — is built on first use (sync.Once) and then cached for
// the life of the Kind. The registry replaces the Kinds when the CRD's spec changes, which
// drops the caches with them.
//
// Validation, defaulting, pruning, list types, embedded resources and CEL rules are
// upstream's (k8s.io/apiextensions-apiserver): the strategy of a custom resource is
// upstream's customresource strategy, fed with the structural schema of the version.
//
// Field selectors on custom resources may name metadata.name, metadata.namespace (namespaced
// resources) and the version's spec.versions[].selectableFields, valued as upstream does
// (Kind.Attrs; the JSONPaths are parsed on first use).
//
// Conversion between versions runs in Kind.FromStorage and Kind.ToStorage: strategy None
// rewrites apiVersion; strategy Webhook sends a ConversionReview over TLS to
// clientConfig.url or to a ready endpoint of clientConfig.service (Options.ResolveService,
// the server's endpoint routing), in the first of conversionReviewVersions Kube speaks
// (v1, v1beta1). A webhook may change labels and annotations (they must be valid) and
// nothing else of metadata. Every converted object is then pruned with the schema of the version it was
// converted to, as upstream: the storage version's on writes, the request's on reads.
//
// A deprecated version's Kind carries its deprecation warning (Kind.DeprecationWarning),
// which the REST handler sends with every response to a request to it.
package crd
