package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Application is a set of Components with shared settings; it is Ready when every
// Component and their dependencies are. Deleting it deletes its Components in reverse
// dependency order, never data services with deletionPolicy Retain. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ApplicationSpec   `json:"spec"`
	Status            ApplicationStatus `json:"status,omitempty"`
}

// ApplicationSpec names the Components and what they share.
type ApplicationSpec struct {
	// Components are Component names in the Application's namespace.
	Components []string `json:"components,omitempty"`
	// Selector adds the Components whose labels match.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Environment is shared with the Components (label kubeos.dev/environment, env
	// KUBEOS_ENVIRONMENT).
	Environment string `json:"environment,omitempty"`
	// Labels are put on every Component's workload and pods.
	Labels map[string]string `json:"labels,omitempty"`
	// DefaultResources apply to Components that set none.
	DefaultResources *corev1.ResourceRequirements `json:"defaultResources,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// ApplicationStatus summarises the Components.
type ApplicationStatus struct {
	lifecycle.Status `json:",inline"`
	// Ready is "<ready>/<total>" Components.
	Ready string `json:"ready,omitempty"`
	// Components is one row per Component: its phase and, when not ready, why.
	Components []ApplicationComponentStatus `json:"components,omitempty"`
}

// ApplicationComponentStatus is one Component's row.
type ApplicationComponentStatus struct {
	Name  string          `json:"name"`
	Phase lifecycle.Phase `json:"phase,omitempty"`
	Ready bool            `json:"ready"`
	// Reason and Message say what blocks it (a dependency, a crash loop).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ApplicationList is a list of Applications.
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Application) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Application) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
