package lifecycle

import (
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusInput is everything the engine knows after a reconcile.
type StatusInput struct {
	Generation int64
	// Conditions and Phase as stored (read-only; NextStatus copies).
	Conditions []metav1.Condition
	Phase      Phase
	Deleting   bool
	// Blocking lists dependencies that are not Active (Graph.Blocking).
	Blocking []Ref
	// Outcome and Err are the driver's answer; Err is a transient error.
	Outcome Outcome
	Err     error
	// GaveUp is true when the retry policy gave up (Retry.GiveUp).
	GaveUp bool
	// Now stamps changed conditions.
	Now time.Time
}

// StatusResult is the status to write (with a resourceVersion precondition).
type StatusResult struct {
	Conditions []metav1.Condition
	Phase      Phase
	// Derived is the phase the conditions call for; when it differs from Phase the engine is
	// walking a legal path there and should requeue at once.
	Derived Phase
	// Illegal is set when no legal path leads to Derived; Phase then stays as it was and the
	// engine counts kube_lifecycle_illegal_transitions_total.
	Illegal error
}

// NextStatus turns a reconcile's result into conditions (the truth) and the phase derived
// from them through table.
func NextStatus(table TransitionTable, in StatusInput) StatusResult {
	conds := append([]metav1.Condition(nil), in.Conditions...)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: in.Generation, LastTransitionTime: metav1.NewTime(in.Now)})
	}
	o := in.Outcome
	reason := func(def string) string {
		if o.Reason != "" {
			return o.Reason
		}
		return def
	}
	terminal := o.Terminal
	if terminal == nil && Classify(in.Err) == ClassPermanent {
		terminal = in.Err
	}
	if terminal == nil && in.GaveUp && in.Err != nil {
		terminal = errors.Join(errors.New("retries exhausted"), in.Err)
	}
	switch {
	case in.Deleting:
		set(ConditionTerminating, metav1.ConditionTrue, reason("Deleting"), o.Message)
		set(ConditionReady, metav1.ConditionFalse, "Terminating", "the object is being deleted")
		if terminal != nil {
			set(ConditionStalled, metav1.ConditionTrue, reason("DeprovisionFailed"), terminal.Error())
		}
	case len(in.Blocking) > 0:
		names := make([]string, len(in.Blocking))
		for i, r := range in.Blocking {
			names[i] = r.String()
		}
		msg := "waiting for " + strings.Join(names, ", ")
		set(ConditionDependenciesReady, metav1.ConditionFalse, "DependenciesNotActive", msg)
		set(ConditionReady, metav1.ConditionFalse, "DependenciesNotActive", msg)
		set(ConditionStalled, metav1.ConditionFalse, "DependenciesNotActive", "")
		// A fresh object waits in Pending; one that got further is Reconciling again.
		if in.Phase == PhaseNone || in.Phase == PhasePending {
			set(ConditionReconciling, metav1.ConditionFalse, "DependenciesNotActive", msg)
		} else {
			set(ConditionReconciling, metav1.ConditionTrue, "DependenciesNotActive", msg)
		}
	default:
		set(ConditionDependenciesReady, metav1.ConditionTrue, "DependenciesActive", "")
		switch {
		case terminal != nil || o.Phase == PhaseFailed:
			msg := o.Message
			if terminal != nil {
				msg = terminal.Error()
			}
			set(ConditionStalled, metav1.ConditionTrue, reason("Failed"), msg)
			set(ConditionReconciling, metav1.ConditionFalse, reason("Failed"), "")
			set(ConditionReady, metav1.ConditionFalse, reason("Failed"), msg)
		case in.Err != nil:
			set(ConditionStalled, metav1.ConditionFalse, "Retrying", "")
			set(ConditionReconciling, metav1.ConditionTrue, "Retrying", in.Err.Error())
		case o.Phase == PhaseReconciling:
			set(ConditionStalled, metav1.ConditionFalse, reason("InProgress"), "")
			set(ConditionReconciling, metav1.ConditionTrue, reason("InProgress"), o.Message)
		default:
			set(ConditionStalled, metav1.ConditionFalse, reason("Provisioned"), "")
			set(ConditionReconciling, metav1.ConditionFalse, reason("Provisioned"), "")
			set(ConditionReady, metav1.ConditionTrue, reason("Provisioned"), o.Message)
		}
	}
	derived := DerivePhase(conds, in.Deleting)
	next, err := table.Step(in.Phase, derived)
	return StatusResult{Conditions: conds, Phase: next, Derived: derived, Illegal: err}
}
