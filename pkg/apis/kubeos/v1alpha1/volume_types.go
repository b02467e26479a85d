package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// AnnotationRestoring on a Volume's claim holds pods back (the node agent refuses to mount
// the claim, FailedMount) until the Volume's restoreFrom has been unpacked into it; its value
// names the Backup.
const AnnotationRestoring = "kubeos.dev/restoring"

// LocalPathClass is the StorageClass of the node agents' local-path provisioner (the
// default class of Volumes).
const LocalPathClass = "local-path"

// Volume is storage for Components: a PersistentVolumeClaim <name>-volume (or, with
// perReplica, a volumeClaimTemplate of the StatefulSet of each Component that uses it).
// Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Volume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VolumeSpec   `json:"spec"`
	Status            VolumeStatus `json:"status,omitempty"`
}

// VolumeSpec is the storage asked for.
type VolumeSpec struct {
	// Size requested; it may grow (when the class allows expansion), never shrink.
	Size resource.Quantity `json:"size"`
	// AccessMode is ReadWriteOnce (default), ReadOnlyMany, ReadWriteMany or ReadWriteOncePod.
	AccessMode string `json:"accessMode,omitempty"`
	// StorageClass (default local-path).
	StorageClass string `json:"storageClass,omitempty"`
	// PerReplica gives each replica of a StatefulSet Component its own claim.
	PerReplica bool `json:"perReplica,omitempty"`
	// DeletionPolicy is Retain (default: the claim and its data stay) or Delete.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// RestoreFrom fills a new Volume from a Backup's archive.
	RestoreFrom *RestoreFrom `json:"restoreFrom,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// VolumeStatus shows the claim.
type VolumeStatus struct {
	lifecycle.Status `json:",inline"`
	// ClaimName is the PersistentVolumeClaim; VolumeName the bound PersistentVolume.
	ClaimName  string `json:"claimName,omitempty"`
	VolumeName string `json:"volumeName,omitempty"`
	// Capacity is the bound capacity.
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// StorageClass in use; Node holds a local volume.
	StorageClass string `json:"storageClass,omitempty"`
	Node         string `json:"node,omitempty"`
	// Restored records the restore of spec.restoreFrom once it is done: a Volume is restored
	// once, never again over newer data (a restart, a new archive of the Backup).
	Restored *VolumeRestored `json:"restored,omitempty"`
}

// VolumeRestored is the restore a Volume received.
type VolumeRestored struct {
	// Backup and Archive (the key in the Backup's Bucket) restored from.
	Backup  string `json:"backup"`
	Archive string `json:"archive"`
	// Time the archive was unpacked into the Volume.
	Time metav1.Time `json:"time"`
}

// VolumeList is a list of Volumes.
// +kubebuilder:object:root=true
type VolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Volume `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Volume) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Volume) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
