// Package endpointslicemirroring is the EndpointSlice mirroring controller: for every
// Service without a selector whose Endpoints were written by someone else (a user, an
// operator, Kube's kubernetesservice controller for the kubernetes Service), it mirrors
// those Endpoints into EndpointSlices managed by endpointslicemirroring-controller.k8s.io,
// so clients that read only EndpointSlices (kube-proxy, CoreDNS, Kube's agent) see them.
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/endpointslicemirroring,
// kube-controller-manager's endpointslice-mirroring-controller) over the API with client-go
// informers and its own identity, on the holder of the
// kube-system/kube-endpointslicemirroring-controller Lease.
package endpointslicemirroring
