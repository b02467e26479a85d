// Package endpointslice is the EndpointSlice controller: for every Service with a selector it
// keeps EndpointSlices (labels kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io) listing the pods
// the selector matches — ready, serving and terminating as upstream decides them,
// publishNotReadyAddresses, named target ports resolved per pod, at most
// MaxEndpointsPerSlice (100) endpoints per slice, headless Services included. It runs
// upstream's own controller (k8s.io/kubernetes/pkg/controller/endpointslice,
// kube-controller-manager's endpointslice-controller) over the API with client-go
// informers and its own identity; the server runs it on the holder of the
// kube-system/kube-endpointslice-controller Lease. Its listers and its pod handler go
// through indexes (sharedinformers.LabelIndexedPods, LabelIndexedEndpointSlices,
// SelectorMappedPods): at 10,000 Services × 10 pods a pod's change reaches its slice in
// tens of milliseconds instead of seconds.
package endpointslice
