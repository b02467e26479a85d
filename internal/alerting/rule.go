package alerting

import (
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// State is the state of an alert (one series) or of a rule (its most advanced alert).
type State string

// The states of Prometheus's alerting rules.
const (
	StateInactive State = "inactive"
	StatePending  State = "pending"
	StateFiring   State = "firing"
)

func (s State) rank() int {
	switch s {
	case StateFiring:
		return 2
	case StatePending:
		return 1
	}
	return 0
}

// LabelAlertName is the label every alert carries with its rule's name.
const LabelAlertName = "alertname"

// Rule is one alerting rule.
type Rule struct {
	// Key identifies the rule in the evaluator ("namespace/name").
	Key string
	// Namespace, Name and UID name the object that declared it (events, notifications).
	Namespace, Name, UID string
	// Expr is the PromQL expression; every series it returns is an alert.
	Expr string
	// For is how long a series must be returned before its alert fires (0: at once).
	For time.Duration
	// KeepFiringFor keeps a firing alert firing this long after its series vanished.
	KeepFiringFor time.Duration
	// Labels are added to every alert (they override the series' labels), Annotations are
	// templates over $labels and $value ({{ $labels.kind }}, {{ $value }}).
	Labels, Annotations map[string]string
	// Prometheus is the base URL of a Prometheus query API; empty evaluates over the
	// evaluator's own samples of its Gatherer.
	Prometheus string
	// Receivers are notified when alerts start firing or resolve.
	Receivers []Notifier
	// GeneratorURL links an alert to its source (notifications' generatorURL).
	GeneratorURL string
}

// ValidateExpr parses expr with the PromQL parser; the error is the parser's message.
func ValidateExpr(expr string) error {
	if expr == "" {
		return fmt.Errorf("expression is empty")
	}
	_, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	return err
}

// Sample is one series of an evaluation's result.
type Sample struct {
	Labels labels.Labels
	Value  float64
}

// Alert is the state of one series of a rule.
type Alert struct {
	// Labels are the series' labels without __name__, plus the rule's labels and alertname.
	Labels      labels.Labels
	Annotations map[string]string
	State       State
	Value       float64
	// ActiveAt is when the series was first returned, FiredAt when the alert fired,
	// ResolvedAt when it resolved, KeepFiringSince when its series vanished while firing.
	ActiveAt, FiredAt, ResolvedAt, KeepFiringSince time.Time
	// LastSentAt is when a notification last carried this alert (resend bookkeeping).
	LastSentAt time.Time
}

// Transition is a change of one alert's state in one evaluation.
type Transition struct {
	Alert    Alert
	From, To State
}

// Notifies reports whether receivers hear of t: an alert that starts firing or resolves.
func (t Transition) Notifies() bool {
	return t.To == StateFiring || (t.From == StateFiring && t.To == StateInactive)
}
