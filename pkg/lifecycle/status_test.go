package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestNextStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tenant := Ref{Kind: "Tenant", Name: "acme"}
	readyConds := NextStatus(DefaultTransitions(), StatusInput{Generation: 1, Phase: PhaseReconciling, Now: now}).Conditions
	failedConds := NextStatus(DefaultTransitions(), StatusInput{Generation: 1, Phase: PhaseReconciling, Now: now,
		Outcome: Outcome{Terminal: errors.New("bad")}}).Conditions
	for _, tc := range []struct {
		name          string
		in            StatusInput
		phase         Phase
		derived       Phase
		illegal       bool
		cond          string
		status        metav1.ConditionStatus
		reason, inMsg string
	}{
		{"first success goes straight to Active", StatusInput{}, PhaseActive, PhaseActive, false, ConditionReady, metav1.ConditionTrue, "Provisioned", ""},
		{"Pending to Active passes Reconciling", StatusInput{Phase: PhasePending}, PhaseReconciling, PhaseActive, false, ConditionReady, metav1.ConditionTrue, "Provisioned", ""},
		{"blocked while new: Pending", StatusInput{Blocking: []Ref{tenant}}, PhasePending, PhasePending, false, ConditionDependenciesReady, metav1.ConditionFalse, "DependenciesNotActive", "waiting for Tenant/acme"},
		{"blocked after Active: Reconciling", StatusInput{Phase: PhaseActive, Conditions: readyConds, Blocking: []Ref{tenant}}, PhaseReconciling, PhaseReconciling, false, ConditionReconciling, metav1.ConditionTrue, "DependenciesNotActive", "Tenant/acme"},
		{"in progress", StatusInput{Phase: PhasePending, Outcome: Outcome{Phase: PhaseReconciling, Reason: "WaitingForIssuer"}}, PhaseReconciling, PhaseReconciling, false, ConditionReconciling, metav1.ConditionTrue, "WaitingForIssuer", ""},
		{"transient error", StatusInput{Phase: PhaseActive, Conditions: readyConds, Err: errors.New("timeout")}, PhaseReconciling, PhaseReconciling, false, ConditionReconciling, metav1.ConditionTrue, "Retrying", "timeout"},
		{"terminal error", StatusInput{Phase: PhaseReconciling, Err: reconcile.TerminalError(errors.New("no such issuer"))}, PhaseFailed, PhaseFailed, false, ConditionStalled, metav1.ConditionTrue, "Failed", "no such issuer"},
		{"retries exhausted", StatusInput{Phase: PhaseReconciling, Err: errors.New("refused"), GaveUp: true}, PhaseFailed, PhaseFailed, false, ConditionStalled, metav1.ConditionTrue, "Failed", "retries exhausted"},
		{"Failed to Active passes Reconciling", StatusInput{Phase: PhaseFailed, Conditions: failedConds}, PhaseReconciling, PhaseActive, false, ConditionStalled, metav1.ConditionFalse, "Provisioned", ""},
		{"deleting", StatusInput{Phase: PhaseActive, Conditions: readyConds, Deleting: true}, PhaseDeleting, PhaseDeleting, false, ConditionTerminating, metav1.ConditionTrue, "Deleting", ""},
		{"no way back to Pending", StatusInput{Phase: PhaseActive, Conditions: readyConds, Blocking: []Ref{tenant}}, PhaseReconciling, PhaseReconciling, false, ConditionReady, metav1.ConditionFalse, "DependenciesNotActive", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Generation, tc.in.Now = 2, now.Add(time.Minute)
			got := NextStatus(DefaultTransitions(), tc.in)
			if got.Phase != tc.phase || got.Derived != tc.derived || (got.Illegal != nil) != tc.illegal {
				t.Fatalf("phase %s derived %s illegal %v; want %s, %s, %v", got.Phase, got.Derived, got.Illegal, tc.phase, tc.derived, tc.illegal)
			}
			c := meta.FindStatusCondition(got.Conditions, tc.cond)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.inMsg) || c.ObservedGeneration != 2 {
				t.Fatalf("%s = %+v; want %s, reason %s, message containing %q, observedGeneration 2", tc.cond, c, tc.status, tc.reason, tc.inMsg)
			}
			if len(tc.in.Conditions) > 0 && &tc.in.Conditions[0] == &got.Conditions[0] {
				t.Fatalf("NextStatus changed its input")
			}
		})
	}
	// A narrowed table with no way out of Failed: the engine refuses and keeps the phase.
	narrow := TransitionTable{PhasePending: {PhaseReconciling}, PhaseReconciling: {PhaseActive}, AnyPhase: {PhaseFailed, PhaseDeleting}}
	got := NextStatus(narrow, StatusInput{Phase: PhaseFailed, Conditions: failedConds, Now: now})
	if got.Phase != PhaseFailed || !errors.Is(got.Illegal, ErrIllegalTransition) {
		t.Fatalf("narrowed table: phase %s, illegal %v", got.Phase, got.Illegal)
	}
	// Unchanged conditions keep their transition time.
	again := NextStatus(DefaultTransitions(), StatusInput{Generation: 1, Phase: PhaseActive, Conditions: readyConds, Now: now.Add(time.Hour)})
	if c := meta.FindStatusCondition(again.Conditions, ConditionReady); !c.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("Ready's lastTransitionTime moved to %s without a change", c.LastTransitionTime)
	}
}
