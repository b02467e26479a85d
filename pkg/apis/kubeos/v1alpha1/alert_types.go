package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Alert states (Prometheus's).
const (
	AlertInactive = "inactive"
	AlertPending  = "pending"
	AlertFiring   = "firing"
)

// Alert is a PromQL alerting rule evaluated over Kube's own metrics (or a registered
// Prometheus, spec.server) that notifies its receivers when it fires and resolves. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Alert struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AlertSpec   `json:"spec"`
	Status            AlertStatus `json:"status,omitempty"`
}

// AlertWebhook posts Alertmanager-format webhook payloads to URL.
type AlertWebhook struct {
	URL string `json:"url"`
}

// AlertAlertmanager sends to a registered alertmanager server entry.
type AlertAlertmanager struct {
	Server string `json:"server"`
}

// AlertEvents records Kubernetes Events on the Alert.
type AlertEvents struct{}

// AlertReceiver is one of webhook, alertmanager or events.
type AlertReceiver struct {
	Webhook      *AlertWebhook      `json:"webhook,omitempty"`
	Alertmanager *AlertAlertmanager `json:"alertmanager,omitempty"`
	Events       *AlertEvents       `json:"events,omitempty"`
}

// AlertSpec is the rule and where it notifies.
type AlertSpec struct {
	// Expr is a PromQL expression; each result sample is an alert instance.
	Expr string `json:"expr"`
	// For is how long the expression must hold before the alert fires; KeepFiringFor how
	// long it keeps firing once it no longer holds.
	For           *metav1.Duration  `json:"for,omitempty"`
	KeepFiringFor *metav1.Duration  `json:"keepFiringFor,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
	Receivers     []AlertReceiver   `json:"receivers,omitempty"`
	// Server names a prometheus server entry to query; empty evaluates over Kube's own
	// metrics sampled in memory.
	Server string `json:"server,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// AlertStatus shows the rule's state.
type AlertStatus struct {
	lifecycle.Status `json:",inline"`
	// State is inactive, pending or firing.
	State          string       `json:"state,omitempty"`
	ActiveSince    *metav1.Time `json:"activeSince,omitempty"`
	LastEvaluation *metav1.Time `json:"lastEvaluation,omitempty"`
	LastError      string       `json:"lastError,omitempty"`
	// Value is the expression's value at the last evaluation (of the first sample).
	Value string `json:"value,omitempty"`
}

// AlertList is a list of Alerts.
// +kubebuilder:object:root=true
type AlertList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Alert `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Alert) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Alert) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
