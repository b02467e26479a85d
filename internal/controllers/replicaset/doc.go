// Package replicaset is the ReplicaSet controller: it keeps each ReplicaSet's number of
// pods at spec.replicas, creating in slow-start batches (1, 2, 4, ...) of at most 500 per
// sync and deleting in upstream's order (unassigned, pending, not ready, lower
// pod-deletion-cost, doubled up on a node, newer); it adopts orphan pods its selector
// matches and releases owned pods that no longer match (controller ownerReferences), and
// writes status (replicas, fullyLabeledReplicas, ready, available, terminating,
// ReplicaFailure).
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/replicaset,
// kube-controller-manager's replicaset-controller) over the API with client-go informers
// and its own identity (system:kube-controller:replicaset-controller), on the holder of
// the kube-system/kube-replicaset-controller Lease. Its expectations live in memory but
// are only a guard against acting on a stale cache: a new term starts with none and
// rebuilds its view from the informers, so a restart never doubles pods.
package replicaset
