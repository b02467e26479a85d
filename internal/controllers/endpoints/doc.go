// Package endpoints is the Endpoints controller: for every Service with a selector it keeps
// the Service's v1 Endpoints object (ready addresses, notReadyAddresses, ports resolved per
// pod, publishNotReadyAddresses, at most 1000 addresses with the
// endpoints.kubernetes.io/over-capacity annotation beyond). Services without a selector are
// left alone, as upstream does — the kubernetes Service's Endpoints stay
// internal/controllers/kubernetesservice's. It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/endpoint, kube-controller-manager's endpoints-controller)
// over the API with client-go informers and its own identity, on the holder of the
// kube-system/kube-endpoints-controller Lease.
package endpoints
