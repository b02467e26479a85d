// Package ephemeral is the ephemeral-volume controller: for every pod with a generic
// ephemeral volume (volumes[].ephemeral.volumeClaimTemplate) it creates the
// PersistentVolumeClaim <pod>-<volume>, owned by the pod so that the garbage collector
// deletes it with the pod, and reports a claim of that name not owned by the pod as a
// conflict. It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/volume/ephemeral,
// kube-controller-manager's ephemeral-volume-controller) over the API with client-go
// informers and its own identity, on the holder of the
// kube-system/kube-ephemeral-volume-controller Lease.
package ephemeral
