package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Workload kinds a Component runs as.
const (
	WorkloadDeployment  = "Deployment"
	WorkloadStatefulSet = "StatefulSet"
	WorkloadJob         = "Job"
	WorkloadCronJob     = "CronJob"
)

// The Component's contract with the kinds that build on it (Release, Route, Application).
const (
	// LabelComponent names the Component on everything it creates and on its pods; the
	// Component's Service selects only on it, so stable and canary pods both serve.
	LabelComponent = "kubeos.dev/component"
	// LabelTrack is TrackStable on the Component's own pods (its workload's selector) and
	// TrackCanary on a Release's canary pods.
	LabelTrack  = "kubeos.dev/track"
	TrackStable = "stable"
	TrackCanary = "canary"
	// AnnotationRolloutStrategy on a Component (Recreate or RollingUpdate) sets its
	// Deployment's strategy (a Release sets it).
	AnnotationRolloutStrategy = "kubeos.dev/rollout-strategy"
	// ComponentContainer is the name of the Component's one container.
	ComponentContainer = "main"
)

// Component is one workload of an application: a Deployment (default), StatefulSet, Job or
// CronJob running one image, the Service that exposes its ports, and an HPA when it
// autoscales. It waits for the data services and Volumes it uses and gets their
// connections as environment variables (or mounts). Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Component struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ComponentSpec   `json:"spec"`
	Status            ComponentStatus `json:"status,omitempty"`
}

// ComponentSpec is what a team declares.
type ComponentSpec struct {
	// Workload is Deployment (default), StatefulSet, Job or CronJob.
	Workload string `json:"workload,omitempty"`
	// Image runs in the one container.
	Image string `json:"image"`
	// Command and Args override the image's entrypoint and arguments.
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is the container's environment; values may hold ${resources.<use>.<key>}
	// placeholders resolved from a used object's connection Secret.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Resources of the container (default: the Application's defaultResources).
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Replicas of a Deployment or StatefulSet (default 1); ignored with Autoscaling.
	Replicas *int32 `json:"replicas,omitempty"`
	// Autoscaling makes an HPA on CPU between min and max replicas.
	Autoscaling *ComponentAutoscaling `json:"autoscaling,omitempty"`
	// Probes of the container.
	LivenessProbe  *corev1.Probe `json:"livenessProbe,omitempty"`
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`
	// Schedule of a CronJob (cron syntax).
	Schedule string `json:"schedule,omitempty"`
	// Exposes are the container ports, served by the Service <name> (none: no Service).
	Exposes []ComponentPort `json:"exposes,omitempty"`
	// Uses are the data services and Volumes the Component needs: each is a dependency
	// (the Component waits until it is Active) and its connection is injected.
	Uses []ComponentUse `json:"uses,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// ComponentPort is a port the container listens on and the Service exposes.
type ComponentPort struct {
	// Name is an IANA service name ("http"); required when there is more than one.
	Name string `json:"name,omitempty"`
	Port int32  `json:"port"`
	// Protocol is TCP (default) or UDP.
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// ComponentUse names an object of kind Database, Cache, Topic, Bucket or Volume in the
// Component's namespace.
type ComponentUse struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// As names the use in placeholders (${resources.<as>.<key>}) and the environment
	// prefix (<AS>_<KEY>); default the object's name.
	As string `json:"as,omitempty"`
	// MountPath of a Volume in the container (required for a Volume).
	MountPath string `json:"mountPath,omitempty"`
}

// ComponentAutoscaling is an HPA on CPU utilization.
type ComponentAutoscaling struct {
	MinReplicas int32 `json:"minReplicas,omitempty"`
	MaxReplicas int32 `json:"maxReplicas"`
	// TargetCPUUtilizationPercentage (default 80).
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// ComponentStatus shows the running workload.
type ComponentStatus struct {
	lifecycle.Status `json:",inline"`
	// Workload is the kind and name of the object that runs the pods.
	Workload *WorkloadRef `json:"workload,omitempty"`
	// Service is the Service exposing the ports (empty: none).
	Service string `json:"service,omitempty"`
	// Replicas, ReadyReplicas and UpdatedReplicas of the workload.
	Replicas        int32 `json:"replicas,omitempty"`
	ReadyReplicas   int32 `json:"readyReplicas,omitempty"`
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// Image is the image the workload's template runs now.
	Image string `json:"image,omitempty"`
	// Release names the Release that owns the rollout in progress (empty: none).
	Release string `json:"release,omitempty"`
}

// WorkloadRef names the object a Component runs as.
type WorkloadRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// ComponentList is a list of Components.
// +kubebuilder:object:root=true
type ComponentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Component `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Component) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Component) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
