package lifecycle

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is the one-word summary in status.phase, derived from the conditions.
type Phase string

// The phases every kind shares.
const (
	// PhaseNone is an object whose status was never written.
	PhaseNone        Phase = ""
	PhasePending     Phase = "Pending"
	PhaseReconciling Phase = "Reconciling"
	PhaseActive      Phase = "Active"
	PhaseFailed      Phase = "Failed"
	PhaseDeleting    Phase = "Deleting"
)

// Phases lists the phases in their natural order.
var Phases = []Phase{PhasePending, PhaseReconciling, PhaseActive, PhaseFailed, PhaseDeleting}

// Condition types: the stored truth the phase is derived from.
const (
	// ConditionReady is True when the object's desired state is provisioned.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the engine works towards a new desired state.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the engine cannot make progress without a change (a
	// permanent error, retries exhausted, a deletion timeout).
	ConditionStalled = "Stalled"
	// ConditionDependenciesReady is False while a dependency is not Active; its message lists
	// the blockers.
	ConditionDependenciesReady = "DependenciesReady"
	// ConditionTerminating is True once deletion has begun.
	ConditionTerminating = "Terminating"
)

// ConditionTypes lists the lifecycle condition types.
var ConditionTypes = []string{ConditionReady, ConditionReconciling, ConditionStalled, ConditionDependenciesReady, ConditionTerminating}

// DerivePhase reads the phase off the conditions (kstatus style), first match wins:
//
//	deleting, or Terminating=True → Deleting
//	Stalled=True                  → Failed
//	Reconciling=True              → Reconciling
//	Ready=True                    → Active
//	otherwise                     → Pending (not started, or waiting for dependencies)
//
// deleting is whether the object has a deletionTimestamp.
func DerivePhase(conditions []metav1.Condition, deleting bool) Phase {
	switch {
	case deleting || meta.IsStatusConditionTrue(conditions, ConditionTerminating):
		return PhaseDeleting
	case meta.IsStatusConditionTrue(conditions, ConditionStalled):
		return PhaseFailed
	case meta.IsStatusConditionTrue(conditions, ConditionReconciling):
		return PhaseReconciling
	case meta.IsStatusConditionTrue(conditions, ConditionReady):
		return PhaseActive
	default:
		return PhasePending
	}
}
