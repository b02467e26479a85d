// Package garbagecollector is the garbage collector: it keeps the graph of ownerReferences
// across every resource the API serves — built-in and custom — and deletes dependents whose
// owners are gone, as kube-controller-manager's garbage collector does:
//
//   - Background: once an owner is gone, each dependent with no remaining owner is deleted.
//   - Foreground: an owner deleted with propagationPolicy=Foreground carries the
//     foregroundDeletion finalizer; its dependents are deleted, and the finalizer is removed
//     once no dependent with blockOwnerDeletion=true remains.
//   - Orphan: an owner with the orphan finalizer has its ownerReference stripped from every
//     dependent, then the finalizer is removed.
//
// A reference is dangling when a live GET of the owner (in the dependent's namespace for a
// namespaced owner) answers NotFound or an object with another UID; deletions are never
// decided from the cache alone, and they carry UID and resourceVersion preconditions. A
// cluster-scoped dependent of a namespaced owner is an invalid reference: a Warning event
// (OwnerRefInvalidNamespace) is recorded and the dependent is left alone.
//
// The graph is fed by metadata informers (k8s.io/client-go/metadata) over the deletable
// resources found through discovery; discovery is repeated periodically and soon after an
// ownerReference names an unknown kind, so resources that appear later (custom resources)
// are picked up and resources that go away stop being watched.
//
// Files: graph.go is the pure graph and the owner classification; garbagecollector_controller.go
// the informers, discovery and the worker pool; garbagecollector_reconcile.go what one work
// item does through the API.
package garbagecollector
