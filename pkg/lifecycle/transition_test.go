package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func cond(t string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: "Test"}
}

func TestDerivePhase(t *testing.T) {
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	for _, tc := range []struct {
		name     string
		conds    []metav1.Condition
		deleting bool
		want     Phase
	}{
		{"no conditions", nil, false, PhasePending},
		{"waiting for dependencies", []metav1.Condition{cond(ConditionDependenciesReady, F), cond(ConditionReady, F)}, false, PhasePending},
		{"ready unknown", []metav1.Condition{cond(ConditionReady, U)}, false, PhasePending},
		{"reconciling", []metav1.Condition{cond(ConditionReconciling, T), cond(ConditionReady, F)}, false, PhaseReconciling},
		{"ready", []metav1.Condition{cond(ConditionReady, T), cond(ConditionReconciling, F)}, false, PhaseActive},
		{"ready but reconciling a new generation", []metav1.Condition{cond(ConditionReady, T), cond(ConditionReconciling, T)}, false, PhaseReconciling},
		{"stalled beats reconciling", []metav1.Condition{cond(ConditionStalled, T), cond(ConditionReconciling, T)}, false, PhaseFailed},
		{"stalled beats ready", []metav1.Condition{cond(ConditionStalled, T), cond(ConditionReady, T)}, false, PhaseFailed},
		{"terminating", []metav1.Condition{cond(ConditionTerminating, T), cond(ConditionReady, T)}, false, PhaseDeleting},
		{"deletionTimestamp set", []metav1.Condition{cond(ConditionStalled, T)}, true, PhaseDeleting},
	} {
		if got := DerivePhase(tc.conds, tc.deleting); got != tc.want {
			t.Errorf("%s: DerivePhase = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDefaultTransitions(t *testing.T) {
	tab := DefaultTransitions()
	if err := tab.Validate(); err != nil {
		t.Fatal(err)
	}
	legal := map[[2]Phase]bool{}
	for _, tr := range [][2]Phase{
		{PhasePending, PhaseReconciling}, {PhaseReconciling, PhaseActive}, {PhaseActive, PhaseReconciling},
		{PhaseFailed, PhaseReconciling},
	} {
		legal[tr] = true
	}
	for _, from := range Phases {
		legal[[2]Phase{from, from}] = true
		if from != PhaseDeleting { // deletion is one-way
			legal[[2]Phase{from, PhaseFailed}] = true
		}
		legal[[2]Phase{from, PhaseDeleting}] = true
		legal[[2]Phase{PhaseNone, from}] = true
	}
	for _, from := range append([]Phase{PhaseNone}, Phases...) {
		for _, to := range Phases {
			want := legal[[2]Phase{from, to}]
			err := tab.Check(from, to)
			if want != (err == nil) {
				t.Errorf("Check(%s, %s) = %v, want legal=%v", from, to, err, want)
			}
			if err != nil {
				var ite *IllegalTransitionError
				if !errors.Is(err, ErrIllegalTransition) || !errors.As(err, &ite) || ite.From != from || ite.To != to ||
					!strings.Contains(err.Error(), string(from)+" → "+string(to)) {
					t.Errorf("Check(%s, %s) error %q does not name the transition", from, to, err)
				}
			}
		}
	}
}

func TestStep(t *testing.T) {
	tab := DefaultTransitions()
	for _, tc := range []struct {
		from, to, want Phase
		illegal        bool
	}{
		{PhasePending, PhaseReconciling, PhaseReconciling, false},
		{PhasePending, PhaseActive, PhaseReconciling, false},
		{PhaseFailed, PhaseActive, PhaseReconciling, false},
		{PhaseActive, PhaseActive, PhaseActive, false},
		{PhaseNone, PhaseActive, PhaseActive, false},
		{PhaseActive, PhasePending, PhaseActive, true}, // nothing leads back to Pending
		{PhaseDeleting, PhaseActive, PhaseDeleting, true},
	} {
		got, err := tab.Step(tc.from, tc.to)
		if got != tc.want || tc.illegal != (err != nil) {
			t.Errorf("Step(%s, %s) = %s, %v; want %s, illegal=%v", tc.from, tc.to, got, err, tc.want, tc.illegal)
		}
	}
	// A kind that narrows the table: no way back from Failed.
	narrow := TransitionTable{PhasePending: {PhaseReconciling}, PhaseReconciling: {PhaseActive}, AnyPhase: {PhaseFailed, PhaseDeleting}}
	if _, err := narrow.Step(PhaseFailed, PhaseActive); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("narrowed table allowed Failed → Active: %v", err)
	}
	if err := (TransitionTable{"Sleeping": {PhaseActive}}).Validate(); err == nil {
		t.Errorf("table with an unknown phase validated")
	}
}

// The generated rule compiles and runs in the API server's own CRD CEL validator and refuses
// exactly what Check refuses.
func TestCELRuleMatchesCheck(t *testing.T) {
	tab := DefaultTransitions()
	rule := tab.CELRule()
	v1schema := &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"phase": {Type: "string", XValidations: apiextensionsv1.ValidationRules{rule}},
		},
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	const perCallLimit, budget = 1000000, 10000000 // k8s.io/apiserver/pkg/apis/cel PerCallLimit, RuntimeCELCostBudget
	validator := cel.NewValidator(s, false, perCallLimit)
	if validator == nil {
		t.Fatal("no validator built from the rule")
	}
	for _, from := range Phases {
		for _, to := range Phases {
			obj := map[string]any{"phase": string(to)}
			old := map[string]any{"phase": string(from)}
			errs, _ := validator.Validate(context.Background(), field.NewPath("status"), s, obj, old, budget)
			want := tab.Check(from, to)
			if (want == nil) != (len(errs) == 0) {
				t.Errorf("%s → %s: server says %v, Check says %v", from, to, errs.ToAggregate(), want)
			}
			if want != nil && len(errs) > 0 && !strings.Contains(errs.ToAggregate().Error(), string(from)+" → "+string(to)) {
				t.Errorf("%s → %s: server message %q does not name the transition", from, to, errs.ToAggregate())
			}
		}
	}
	// Creation (no old value) is not constrained.
	if errs, _ := validator.Validate(context.Background(), field.NewPath("status"), s, map[string]any{"phase": "Active"}, nil, budget); len(errs) > 0 {
		t.Errorf("first write refused: %v", errs)
	}
	t.Logf("rule: %s", rule.Rule)
}
