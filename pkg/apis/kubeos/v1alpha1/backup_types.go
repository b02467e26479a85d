package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Backup dumps a Database, Cache or Topic with the real tool into a Bucket on a schedule and
// prunes old archives by its retention. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BackupSpec   `json:"spec"`
	Status            BackupStatus `json:"status,omitempty"`
}

// BackupSource names what is backed up, in the Backup's namespace.
type BackupSource struct {
	// Kind is Database, Cache, Topic or Volume (a gzipped tar of its files).
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// BackupTarget names the Bucket the archives go to, in the Backup's namespace.
type BackupTarget struct {
	Bucket string `json:"bucket"`
}

// BackupRetention decides which archives are kept (an archive kept by any rule stays; the
// last successful one always stays).
type BackupRetention struct {
	KeepLast   int32            `json:"keepLast,omitempty"`
	KeepDaily  int32            `json:"keepDaily,omitempty"`
	KeepWeekly int32            `json:"keepWeekly,omitempty"`
	TTL        *metav1.Duration `json:"ttl,omitempty"`
}

// BackupSpec is what to back up, where and when.
type BackupSpec struct {
	Source BackupSource `json:"source"`
	Target BackupTarget `json:"target"`
	// Schedule is a cron expression (5 fields, or 6 with seconds); empty runs once.
	Schedule string `json:"schedule,omitempty"`
	// TimeZone of the schedule (IANA name, default UTC).
	TimeZone  string          `json:"timeZone,omitempty"`
	Retention BackupRetention `json:"retention,omitempty"`
	// Suspend stops scheduling new runs.
	Suspend bool `json:"suspend,omitempty"`
	// DeletionPolicy is Retain (default: the archives stay) or Delete (they are removed).
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// BackupRun is one run's result.
type BackupRun struct {
	Time metav1.Time `json:"time"`
	// Archive is the object key in the target bucket.
	Archive   string           `json:"archive,omitempty"`
	SizeBytes int64            `json:"sizeBytes,omitempty"`
	Duration  *metav1.Duration `json:"duration,omitempty"`
	// Error is the tool's error of a failed run.
	Error string `json:"error,omitempty"`
}

// BackupFailure is the last failed run.
type BackupFailure struct {
	Time  metav1.Time `json:"time"`
	Error string      `json:"error"`
}

// BackupStatus shows the runs.
type BackupStatus struct {
	lifecycle.Status `json:",inline"`
	LastSuccessful   *BackupRun     `json:"lastSuccessful,omitempty"`
	LastFailure      *BackupFailure `json:"lastFailure,omitempty"`
	// History lists the archives kept, newest first.
	History []BackupRun  `json:"history,omitempty"`
	NextRun *metav1.Time `json:"nextRun,omitempty"`
}

// BackupList is a list of Backups.
// +kubebuilder:object:root=true
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Backup) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Backup) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
