// Package ttlafterfinished is the TTL-after-finished controller: it deletes a finished
// Job (Complete or Failed) ttlSecondsAfterFinished after it finished, in the foreground
// so its pods go first.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/ttlafterfinished,
// kube-controller-manager's ttl-after-finished-controller) over the API with client-go
// informers and its own identity (system:kube-controller:ttl-after-finished-controller),
// on the holder of the kube-system/kube-ttl-after-finished-controller Lease.
package ttlafterfinished
