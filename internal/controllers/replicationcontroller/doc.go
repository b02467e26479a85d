// Package replicationcontroller is the ReplicationController manager: the ReplicaSet
// controller's logic applied to core/v1 ReplicationControllers (upstream implements it by
// converting them to ReplicaSets), with the same batches, deletion order, adoption and
// release.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/replication,
// kube-controller-manager's replicationcontroller-controller) over the API with client-go
// informers and its own identity (system:kube-controller:replicationcontroller-controller),
// on the holder of the kube-system/kube-replicationcontroller-controller Lease.
package replicationcontroller
