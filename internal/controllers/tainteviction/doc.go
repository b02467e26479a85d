// Package tainteviction is the taint-eviction controller: a pod on a node with a NoExecute
// taint it does not tolerate is deleted at once; one that tolerates it for
// tolerationSeconds (300 s for the not-ready and unreachable taints through the
// DefaultTolerationSeconds admission plugin) is deleted when that time has passed, unless
// the taint went away first. It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/tainteviction, kube-controller-manager's
// taint-eviction-controller) over the API with client-go informers and its own identity, on
// the holder of the kube-system/kube-taint-eviction-controller Lease.
package tainteviction
