// Package localpath is the local-path provisioner: dynamic PersistentVolumes for the
// StorageClass local-path (provisioner kubeos.dev/local-path), directories on the node that
// the scheduler chose for the claim's first pod, as rancher's local-path-provisioner makes
// them.
//
// The contract, claim by claim and volume by volume:
//
//   - Start ensures the StorageClass local-path (volumeBindingMode WaitForFirstConsumer,
//     allowVolumeExpansion true, reclaimPolicy Delete); it is marked the default class
//     (storageclass.kubernetes.io/is-default-class "true") only when no other class is.
//     An existing local-path class is left as it is.
//   - A Pending claim of a class of this provisioner that carries the scheduler's
//     volume.kubernetes.io/selected-node gets a PersistentVolume pvc-<claim uid>: the node's
//     agent makes the directory <agent data dir>/volumes/<pv> (mode 0777) through the API
//     server's nodes/<node>/proxy/volumes/<pv> (POST) and answers its path; the PV has
//     spec.local.path, a required nodeAffinity on the node's kubernetes.io/hostname, the
//     claim's size, access modes and volume mode, a claimRef to the claim (so the binder
//     binds exactly it), the class's reclaim policy and mount options, the annotation
//     pv.kubernetes.io/provisioned-by and the finalizer kubeos.dev/local-path-cleanup.
//     Simulated nodes (sim.kubeos.dev/node) have no agent: their PVs name a directory
//     /simulated/volumes/<pv> that nothing creates.
//   - A bound claim whose request grows past its PV's capacity: the PV's capacity is raised
//     and then the claim's status.capacity (and allocatedResources). A directory has no
//     size, so nothing enforces the size (no quota); this only records it. Shrinking is
//     refused by the API server's validation, not here.
//   - The hand-off of a deleted volume: a PV of this provisioner that is Released with
//     reclaimPolicy Delete, or that is being deleted with reclaimPolicy Delete, is cleaned up
//     by the node's agent (DELETE nodes/<node>/proxy/volumes/<pv> removes the directory);
//     only once the agent answered is the finalizer removed (and a Released PV deleted), so
//     a PV never disappears while its data is still on disk. A Retain PV that is deleted
//     keeps its directory (the finalizer is just removed). A node that no longer exists
//     cannot be cleaned: the finalizer goes with a Warning event naming the leaked
//     directory.
//
// The decisions (decideClaim, decideVolume, newVolume, defaultClass) are pure and
// table-tested; the controller is a thin shell over client-go informers and a rate-limited
// queue, run on the holder of the kube-system/kube-local-path-provisioner Lease.
package localpath
