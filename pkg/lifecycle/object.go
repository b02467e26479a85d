package lifecycle

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Status is the part of a managed object's status the engine owns. A kind embeds it inline
// in its status struct next to its own fields:
//
//	type CredentialStatus struct {
//		lifecycle.Status `json:",inline"`
//		LastRotated *metav1.Time `json:"lastRotated,omitempty"`
//	}
type Status struct {
	// Phase is derived from Conditions through the kind's transition table.
	Phase Phase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the engine last reconciled.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the stored truth: Ready, Reconciling, Stalled, DependenciesReady,
	// Terminating.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyInto copies s into out.
func (s *Status) DeepCopyInto(out *Status) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// Object is what the engine manages: a typed API object that exposes its lifecycle status.
type Object interface {
	client.Object
	// LifecycleStatus returns a pointer into the object's status (the engine reads and sets it).
	LifecycleStatus() *Status
}
