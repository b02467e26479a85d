// Package persistentvolume is the PersistentVolume binder: it binds each pending
// PersistentVolumeClaim to the smallest available PersistentVolume that satisfies its
// size, access modes, volume mode, storage class and selector (static binding, both sides'
// claimRef/volumeName and phases as upstream), leaves claims of a WaitForFirstConsumer
// class until a pod using them is scheduled, and for claims of a StorageClass whose
// provisioner is not in-tree (there are no in-tree volume plugins here) annotates them with
// volume.kubernetes.io/storage-provisioner and waits for that external provisioner (the
// node agent's local-path provisioner), with the ExternalProvisioning event. Released
// volumes with reclaimPolicy Delete are left to their provisioner. It runs upstream's own
// controller (k8s.io/kubernetes/pkg/controller/volume/persistentvolume,
// kube-controller-manager's persistentvolume-binder-controller) over the API with client-go
// informers and its own identity, on the holder of the
// kube-system/kube-persistentvolume-binder-controller Lease.
package persistentvolume
