// Package registry is Kube's type registry: every resource the API serves, built-in or
// custom, is a Kind definition here — its names, scope, verbs, subresources, schema and
// strategy (how objects are prepared, validated, printed and selected). The handlers know no
// resource by name; they ask the registry.
//
// Built-in kinds are registered at start (Builtins): core namespaces, configmaps, secrets,
// serviceaccounts and events, events.k8s.io events, leases, the RBAC kinds, CRDs and the
// admission webhook configurations. Their strategies decode the unstructured object into its
// k8s.io/api type (type mismatches become field errors, never panics) and validate it as
// kube-apiserver does, metadata included (ValidateObjectMeta). Their schemas are generated
// from the Go types on first use (schema.go: Definitions, DefinitionsV3, SchemaOf). Custom resources are added and removed
// at run time as CRDs come and go; lookups are safe for concurrent use with changes.
package registry
