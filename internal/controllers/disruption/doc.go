// Package disruption is the disruption controller: it writes each PodDisruptionBudget's
// status — expectedPods (from the scale of the pods' controllers: Deployments,
// ReplicaSets, ReplicationControllers, StatefulSets, or any kind with a scale
// subresource), currentHealthy, desiredHealthy, disruptionsAllowed and the
// DisruptionAllowed condition — which pods/eviction (and so kubectl drain) checks, and it
// clears stale DisruptionTarget conditions of pods an eviction did not delete.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/disruption,
// kube-controller-manager's disruption-controller) over the API with client-go informers,
// a discovery-backed REST mapper and a scale client, with its own identity
// (system:kube-controller:disruption-controller), on the holder of the
// kube-system/kube-disruption-controller Lease.
package disruption
