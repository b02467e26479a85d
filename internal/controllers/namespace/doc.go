// Package namespace is the namespace controller: when a namespace is deleted (it then has a
// deletionTimestamp and phase Terminating), it deletes everything in it — every namespaced
// resource the API serves, built-in or custom — reports what still blocks it in the
// namespace's conditions (NamespaceContentRemaining, NamespaceFinalizersRemaining), and
// when the namespace is empty removes the "kubernetes" finalizer so the namespace goes.
//
// It reaches state only through the API, with its own identity, and records
// events.k8s.io/v1 Events on the namespace for each step (DeletingContent, ContentRemaining,
// ContentDeleted).
package namespace
