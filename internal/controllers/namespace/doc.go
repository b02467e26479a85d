// Package namespace is the namespace controller: when a namespace is deleted (it then has a
// deletionTimestamp and phase Terminating), it deletes everything in it — every namespaced
// resource the API serves, built-in or custom, pods first (upstream's ordered namespace
// deletion) — reports what still blocks it in the namespace's conditions
// (NamespaceDeletionDiscoveryFailure, NamespaceDeletionContentFailure,
// NamespaceContentRemaining, NamespaceFinalizersRemaining), and when the namespace is empty
// removes the "kubernetes" finalizer so the namespace goes.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/namespace,
// kube-controller-manager's namespace-controller) over the API with its own identity, and
// records events.k8s.io/v1 Events on the namespace when its deletion starts
// (DeletingContent) and when it is gone (ContentDeleted).
package namespace
