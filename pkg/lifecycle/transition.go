package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// AnyPhase as a From in a TransitionTable means "from every phase but Deleting": deletion is
// one-way (any → Deleting → object gone) unless a table lists moves out of Deleting itself.
const AnyPhase Phase = "*"

// TransitionTable lists, per phase, the phases it may move to. Staying in the same phase is
// always allowed, and so is any first phase (from PhaseNone): the server's CEL rule cannot see
// an old value that does not exist either.
type TransitionTable map[Phase][]Phase

// DefaultTransitions is the table every kind starts from:
// Pending → Reconciling → Active; Active ↔ Reconciling; Failed → Reconciling; any → Failed;
// any → Deleting.
func DefaultTransitions() TransitionTable {
	return TransitionTable{
		PhasePending:     {PhaseReconciling},
		PhaseReconciling: {PhaseActive},
		PhaseActive:      {PhaseReconciling},
		PhaseFailed:      {PhaseReconciling},
		AnyPhase:         {PhaseFailed, PhaseDeleting},
	}
}

// ErrIllegalTransition is wrapped by the *IllegalTransitionError that Check and Step return.
var ErrIllegalTransition = errors.New("illegal phase transition")

// IllegalTransitionError names a refused transition.
type IllegalTransitionError struct {
	From, To Phase
}

func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("%s: %s → %s", ErrIllegalTransition, e.From, e.To)
}

func (e *IllegalTransitionError) Unwrap() error { return ErrIllegalTransition }

// Allowed reports whether from → to is in the table.
func (t TransitionTable) Allowed(from, to Phase) bool {
	if from == to || from == PhaseNone {
		return true
	}
	return slices.Contains(t[from], to) || (from != PhaseDeleting && slices.Contains(t[AnyPhase], to))
}

// Check returns nil for a legal transition and an *IllegalTransitionError otherwise.
func (t TransitionTable) Check(from, to Phase) error {
	if t.Allowed(from, to) {
		return nil
	}
	return &IllegalTransitionError{From: from, To: to}
}

// Step returns the phase to write next on the way from → to: to itself when the transition is
// legal, else the first phase of a shortest legal path (Failed → Active passes through
// Reconciling), so every single write is legal. With no legal path it returns from and an
// *IllegalTransitionError.
func (t TransitionTable) Step(from, to Phase) (Phase, error) {
	if t.Allowed(from, to) {
		return to, nil
	}
	// Breadth-first over a handful of phases; first hops in table order keep it deterministic.
	first := map[Phase]Phase{}
	queue := []Phase{}
	for _, p := range t.next(from) {
		if _, seen := first[p]; !seen && p != from {
			first[p] = p
			queue = append(queue, p)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			return first[p], nil
		}
		for _, q := range t.next(p) {
			if _, seen := first[q]; !seen && q != from {
				first[q] = first[p]
				queue = append(queue, q)
			}
		}
	}
	return from, &IllegalTransitionError{From: from, To: to}
}

func (t TransitionTable) next(p Phase) []Phase {
	if p == PhaseDeleting {
		return t[p]
	}
	return append(slices.Clone(t[p]), t[AnyPhase]...)
}

// Validate refuses tables that name unknown phases or make a phase unreachable to leave.
func (t TransitionTable) Validate() error {
	known := func(p Phase) bool { return slices.Contains(Phases, p) }
	for from, tos := range t {
		if from != AnyPhase && !known(from) {
			return fmt.Errorf("transition table: unknown phase %q", from)
		}
		for _, to := range tos {
			if !known(to) {
				return fmt.Errorf("transition table: unknown phase %q (from %s)", to, from)
			}
		}
	}
	return nil
}

// CELRule is the CRD validation rule that makes the API server refuse illegal writes of
// status.phase. Put it in the x-kubernetes-validations of the phase property itself (its
// schema is a string): self is the new phase, oldSelf the stored one. The message names
// the transition (422 "illegal phase transition: Failed → Active").
func (t TransitionTable) CELRule() apiextensionsv1.ValidationRule {
	// Group the allowed targets of each source phase: oldSelf == 'A' && self in ['B', 'C'].
	targets := map[Phase][]string{}
	for from, tos := range t {
		for _, to := range tos {
			targets[from] = append(targets[from], strconv.Quote(string(to)))
		}
	}
	var terms []string
	terms = append(terms, "self == oldSelf")
	if any := targets[AnyPhase]; len(any) > 0 {
		terms = append(terms, fmt.Sprintf("(oldSelf != %s && self in [%s])", strconv.Quote(string(PhaseDeleting)),
			strings.Join(sortUnique(any), ", ")))
	}
	var froms []string
	for from := range targets {
		if from != AnyPhase {
			froms = append(froms, string(from))
		}
	}
	sort.Strings(froms)
	for _, from := range froms {
		terms = append(terms, fmt.Sprintf("(oldSelf == %s && self in [%s])", strconv.Quote(from),
			strings.Join(sortUnique(targets[Phase(from)]), ", ")))
	}
	return apiextensionsv1.ValidationRule{
		Rule:              strings.Join(terms, " || "),
		Message:           "illegal phase transition",
		MessageExpression: `"illegal phase transition: " + oldSelf + " → " + self`,
		Reason:            ptr(apiextensionsv1.FieldValueForbidden),
	}
}

func sortUnique(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

func ptr[T any](v T) *T { return &v }
