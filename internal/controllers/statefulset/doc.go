// Package statefulset is the StatefulSet controller: pods with stable names
// <set>-<ordinal> (from .spec.ordinals.start), created and deleted one at a time in order
// (OrderedReady) or all at once (Parallel); PersistentVolumeClaims
// <template>-<set>-<ordinal> from volumeClaimTemplates, kept or deleted by
// persistentVolumeClaimRetentionPolicy; ControllerRevisions of the pod template, with
// currentRevision/updateRevision, RollingUpdate (partition, maxUnavailable) and OnDelete.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/statefulset,
// kube-controller-manager's statefulset-controller) over the API with client-go informers
// and its own identity (system:kube-controller:statefulset-controller), on the holder of
// the kube-system/kube-statefulset-controller Lease.
package statefulset
