// Package pvcprotection is the PVC protection controller: it puts the
// kubernetes.io/pvc-protection finalizer on every PersistentVolumeClaim and removes it from
// a deleted claim only once no pod that is not terminated uses it, so a claim in use is not
// deleted under its pods. It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/volume/pvcprotection, kube-controller-manager's
// persistentvolumeclaim-protection-controller) over the API with client-go informers and
// its own identity, on the holder of the kube-system/kube-pvc-protection-controller Lease.
package pvcprotection
