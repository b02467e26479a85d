package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Release strategies and rollout phases.
const (
	ReleaseRolling  = "Rolling"
	ReleaseRecreate = "Recreate"
	ReleaseCanary   = "Canary"

	ReleaseProgressing = "Progressing"
	ReleasePaused      = "Paused"
	ReleaseSucceeded   = "Succeeded"
	ReleaseRolledBack  = "RolledBack"
	ReleaseAborted     = "Aborted"
)

// Annotations that move a paused or failing Release (kubectl kube promote|abort set them).
const (
	PromoteAnnotation = "kubeos.dev/promote"
	AbortAnnotation   = "kubeos.dev/abort"
)

// Release ships versioned changes (image and/or environment) of one Component: each change
// of its spec is a revision, rolled out by its strategy and rolled back by itself when the
// rollout or its analysis fails. One Release per Component. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Release struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ReleaseSpec   `json:"spec"`
	Status            ReleaseStatus `json:"status,omitempty"`
}

// ReleaseSpec is the revision to ship and how.
type ReleaseSpec struct {
	// Component is the Component in the Release's namespace.
	Component string `json:"component"`
	// Image is the revision's image (empty: the Component's).
	Image string `json:"image,omitempty"`
	// Env is merged by name over the Component's environment.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Strategy is how the revision replaces the stable one.
	Strategy ReleaseStrategy `json:"strategy,omitempty"`
	// ProgressDeadlineSeconds a step may take to become ready before the revision is
	// rolled back (default 600).
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	// HistoryLimit is how many revisions status.history keeps (default 10).
	HistoryLimit *int32 `json:"historyLimit,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// ReleaseStrategy is Rolling (default), Recreate or Canary with steps.
type ReleaseStrategy struct {
	Type string `json:"type,omitempty"`
	// Steps of a Canary: each sets a weight or pauses.
	Steps []ReleaseStep `json:"steps,omitempty"`
	// Analysis fails the revision (and rolls it back) when a named Alert fires.
	Analysis *ReleaseAnalysis `json:"analysis,omitempty"`
}

// ReleaseStep is one step of a Canary: exactly one of SetWeight and Pause.
type ReleaseStep struct {
	// SetWeight sends this percentage of traffic to the canary: through the weights of the
	// Route fronting the Component when there is one, else through replica ratios.
	SetWeight *int32 `json:"setWeight,omitempty"`
	// Pause waits for Duration, or until promoted when Duration is empty.
	Pause *ReleasePause `json:"pause,omitempty"`
}

// ReleasePause waits.
type ReleasePause struct {
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// ReleaseAnalysis is "no named Alert fires for Duration" after each step.
type ReleaseAnalysis struct {
	// Alerts in the Release's namespace.
	Alerts []string `json:"alerts"`
	// Duration the Alerts must stay quiet before the next step (default 1m).
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// ReleaseStatus is the rollout's progress.
type ReleaseStatus struct {
	lifecycle.Status `json:",inline"`
	// ReleasePhase is Progressing, Paused, Succeeded, RolledBack or Aborted.
	ReleasePhase string `json:"releasePhase,omitempty"`
	// CurrentStep is the index of the Canary step under way.
	CurrentStep *int32 `json:"currentStep,omitempty"`
	// CanaryWeight is the share of traffic (percent) the canary gets now; nil: no canary.
	// The gateway reads it: a Route backend naming the Component sends this share to the
	// Service <component>-canary and the rest to <component>-stable.
	CanaryWeight *int32 `json:"canaryWeight,omitempty"`
	// StableRevision and CanaryRevision name revisions (hash of image and env).
	StableRevision string `json:"stableRevision,omitempty"`
	CanaryRevision string `json:"canaryRevision,omitempty"`
	// PausedUntil ends a timed pause.
	PausedUntil *metav1.Time `json:"pausedUntil,omitempty"`
	// History lists revisions, newest first, with their outcome.
	History []ReleaseRevision `json:"history,omitempty"`
}

// ReleaseRevision is one revision's outcome.
type ReleaseRevision struct {
	Revision string `json:"revision"`
	Image    string `json:"image,omitempty"`
	// Outcome is Succeeded, RolledBack or Aborted (empty: under way).
	Outcome string       `json:"outcome,omitempty"`
	Started metav1.Time  `json:"started"`
	Ended   *metav1.Time `json:"ended,omitempty"`
	Message string       `json:"message,omitempty"`
}

// ReleaseList is a list of Releases.
// +kubebuilder:object:root=true
type ReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Release `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Release) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Release) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
