// Package pvprotection is the PV protection controller: it puts the
// kubernetes.io/pv-protection finalizer on every PersistentVolume and removes it from a
// deleted volume only once no claim is bound to it. It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/volume/pvprotection, kube-controller-manager's
// persistentvolume-protection-controller) over the API with client-go informers and its own
// identity, on the holder of the kube-system/kube-pv-protection-controller Lease.
package pvprotection
