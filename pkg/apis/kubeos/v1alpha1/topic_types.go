package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Topic retention and storage values (JetStream's).
const (
	RetentionLimits    = "Limits"
	RetentionInterest  = "Interest"
	RetentionWorkQueue = "WorkQueue"
	StorageFile        = "File"
	StorageMemory      = "Memory"
)

// Topic is a NATS JetStream stream on a registered server (the embedded one by default) whose
// subjects lie under the tenant's prefix <tenant>., with its connection in the Secret
// <name>-topic. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Topic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TopicSpec   `json:"spec"`
	Status            TopicStatus `json:"status,omitempty"`
}

// TopicSpec is what a team asks for.
type TopicSpec struct {
	// Server names a nats server entry; empty is the default one.
	Server string `json:"server,omitempty"`
	// DeletionPolicy is Retain (default) or Delete.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
	// Subjects of the stream, under the tenant's prefix <tenant>.
	Subjects []string `json:"subjects,omitempty"`
	// Retention is Limits (default), Interest or WorkQueue.
	Retention string `json:"retention,omitempty"`
	// MaxAge and MaxBytes bound what the stream keeps (0: unlimited).
	MaxAge   *metav1.Duration `json:"maxAge,omitempty"`
	MaxBytes int64            `json:"maxBytes,omitempty"`
	// Replicas (default 1).
	Replicas int32 `json:"replicas,omitempty"`
	// Storage is File (default) or Memory (immutable).
	Storage string `json:"storage,omitempty"`
	// RestoreFrom creates the stream from a Backup's archive.
	RestoreFrom *RestoreFrom `json:"restoreFrom,omitempty"`
}

// TopicStatus shows the stream.
type TopicStatus struct {
	lifecycle.Status `json:",inline"`
	DataStatus       `json:",inline"`
	Stream           string `json:"stream,omitempty"`
	Messages         int64  `json:"messages,omitempty"`
	Bytes            int64  `json:"bytes,omitempty"`
	Consumers        int64  `json:"consumers,omitempty"`
}

// TopicList is a list of Topics.
// +kubebuilder:object:root=true
type TopicList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topic `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Topic) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Topic) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
