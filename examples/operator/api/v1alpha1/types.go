package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/pkg/lifecycle"
)

// GroupVersion is example.kubeos.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "example.kubeos.dev", Version: "v1alpha1"}

// Greeting renders "<message>, <to>!" into the ConfigMap <name>-greeting in its namespace,
// once the Credential it names (a built-in kubeos.dev kind) is Active; the ConfigMap also
// names the Credential's Secret. Namespaced.
// +kubebuilder:object:root=true
type Greeting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GreetingSpec   `json:"spec"`
	Status            GreetingStatus `json:"status,omitempty"`
}

// GreetingSpec is what to say, to whom, and the Credential to wait for.
type GreetingSpec struct {
	// Message is the greeting word ("Hello").
	Message string `json:"message"`
	// To is who is greeted ("world").
	To string `json:"to"`
	// Credential names a kubeos.dev Credential in the Greeting's namespace that must be Active
	// before the ConfigMap is written (empty: none).
	Credential string `json:"credential,omitempty"`
}

// GreetingStatus is the engine's lifecycle status and what the driver wrote.
type GreetingStatus struct {
	lifecycle.Status `json:",inline"`
	// ConfigMap is the name of the rendered ConfigMap.
	ConfigMap string `json:"configMap,omitempty"`
	// Text is the rendered greeting.
	Text string `json:"text,omitempty"`
}

// GreetingList is a list of Greetings.
// +kubebuilder:object:root=true
type GreetingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Greeting `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (g *Greeting) LifecycleStatus() *lifecycle.Status { return &g.Status.Status }

var _ lifecycle.Object = (*Greeting)(nil)

// AddToScheme registers Greeting and GreetingList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Greeting{}, &GreetingList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
