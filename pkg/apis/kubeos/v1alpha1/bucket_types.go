package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Bucket is a bucket on a registered S3-compatible store (the embedded one by default) plus an
// access key limited to it, with the COSI_S3_* keys in the Secret <name>-bucket. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Bucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BucketSpec   `json:"spec"`
	Status            BucketStatus `json:"status,omitempty"`
}

// BucketSpec is what a team asks for.
type BucketSpec struct {
	// Server names an s3 server entry; empty is the default one.
	Server string `json:"server,omitempty"`
	// DeletionPolicy is Retain (default), Delete or DeleteIfEmpty.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
	// BucketName on the store (immutable; default <namespace>-<name>).
	BucketName string `json:"bucketName,omitempty"`
	// Existing binds a bucket that already exists instead of creating one.
	Existing bool `json:"existing,omitempty"`
	// Versioning turns on object versioning.
	Versioning bool `json:"versioning,omitempty"`
	// QuotaHint is the size the bucket is expected to stay under (reported, not enforced).
	QuotaHint *resource.Quantity `json:"quotaHint,omitempty"`
}

// BucketStatus shows the bucket.
type BucketStatus struct {
	lifecycle.Status `json:",inline"`
	DataStatus       `json:",inline"`
	BucketName       string `json:"bucketName,omitempty"`
	Endpoint         string `json:"endpoint,omitempty"`
	UsageBytes       int64  `json:"usageBytes,omitempty"`
	// AccessKeyID of the bucket's key (the secret key is only in the connection Secret).
	AccessKeyID string `json:"accessKeyID,omitempty"`
}

// BucketList is a list of Buckets.
// +kubebuilder:object:root=true
type BucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Bucket `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Bucket) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Bucket) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
