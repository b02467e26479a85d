package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Cache is a Redis ACL user on a registered server restricted to its key prefix (and to
// channels of the same prefix), with its connection in the Secret <name>-cache. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Cache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CacheSpec   `json:"spec"`
	Status            CacheStatus `json:"status,omitempty"`
}

// CacheSpec is what a team asks for.
type CacheSpec struct {
	// Server names a redis server entry; empty is the default one.
	Server string `json:"server,omitempty"`
	// DeletionPolicy is Retain (default: the keys stay, the user is disabled) or Delete
	// (the user is deleted and the prefix's keys unlinked).
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
	// PasswordFrom takes the user's password from a Credential.
	PasswordFrom *PasswordFrom `json:"passwordFrom,omitempty"`
	// KeyPrefix overrides the default prefix <namespace>.<name>: (immutable).
	KeyPrefix string `json:"keyPrefix,omitempty"`
	// MaxMemory is a hint of the memory the cache needs (reported, not enforced).
	MaxMemory *resource.Quantity `json:"maxMemory,omitempty"`
	// RestoreFrom loads the keys of a Backup's archive.
	RestoreFrom *RestoreFrom `json:"restoreFrom,omitempty"`
}

// CacheStatus shows what was provisioned.
type CacheStatus struct {
	lifecycle.Status `json:",inline"`
	DataStatus       `json:",inline"`
	// User is the ACL user; KeyPrefix its key and channel prefix.
	User      string `json:"user,omitempty"`
	KeyPrefix string `json:"keyPrefix,omitempty"`
}

// CacheList is a list of Caches.
// +kubebuilder:object:root=true
type CacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cache `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Cache) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Cache) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
