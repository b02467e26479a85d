package alerting

import (
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

// ResolvedRetention is how long a resolved alert is remembered (and re-sent as resolved), as
// in Prometheus.
const ResolvedRetention = 15 * time.Minute

// StepInput is what one evaluation of a rule brings to Step.
type StepInput struct {
	Name          string
	For           time.Duration
	KeepFiringFor time.Duration
	Labels        map[string]string
	Annotations   map[string]string
	// Results are the series the expression returned at Now.
	Results []Sample
	Now     time.Time
}

// Step applies Prometheus's alerting-rule state machine: it returns the alerts after one
// evaluation, keyed by the hash of their labels, and the transitions it made. prev is not
// modified.
func Step(prev map[uint64]Alert, in StepInput) (map[uint64]Alert, []Transition) {
	next := make(map[uint64]Alert, len(prev)+len(in.Results))
	var tr []Transition
	seen := map[uint64]bool{}
	for _, s := range in.Results {
		if value.IsStaleNaN(s.Value) {
			continue
		}
		lset := alertLabels(in.Name, s.Labels, in.Labels)
		h := lset.Hash()
		if seen[h] {
			continue // duplicate series after label rewriting: the first wins, as Prometheus errs
		}
		seen[h] = true
		a, ok := prev[h]
		if !ok || a.State == StateInactive {
			a = Alert{Labels: lset, State: StatePending, ActiveAt: in.Now}
			tr = append(tr, Transition{Alert: a, From: StateInactive, To: StatePending})
		}
		a.Value = s.Value
		a.KeepFiringSince = time.Time{}
		a.Annotations = expand(in.Annotations, lset, s.Value)
		if a.State == StatePending && in.Now.Sub(a.ActiveAt) >= in.For {
			a.State, a.FiredAt = StateFiring, in.Now
			tr = append(tr, Transition{Alert: a, From: StatePending, To: StateFiring})
		}
		next[h] = a
	}
	for h, a := range prev {
		if seen[h] {
			continue
		}
		if a.State == StateFiring && in.KeepFiringFor > 0 {
			if a.KeepFiringSince.IsZero() {
				a.KeepFiringSince = in.Now
			}
			if in.Now.Sub(a.KeepFiringSince) < in.KeepFiringFor {
				next[h] = a
				continue
			}
		}
		switch a.State {
		case StatePending:
			tr = append(tr, Transition{Alert: a, From: StatePending, To: StateInactive})
			continue // dropped, as Prometheus drops a pending alert whose series vanished
		case StateFiring:
			a.State, a.ResolvedAt = StateInactive, in.Now
			tr = append(tr, Transition{Alert: a, From: StateFiring, To: StateInactive})
		}
		if in.Now.Sub(a.ResolvedAt) > ResolvedRetention {
			continue
		}
		next[h] = a
	}
	slices.SortFunc(tr, func(a, b Transition) int { return labels.Compare(a.Alert.Labels, b.Alert.Labels) })
	return next, tr
}

// Summary is a rule's state: its most advanced alert's state, since when, and its value.
type Summary struct {
	State       State
	ActiveSince time.Time
	Value       float64
	// Alerts counts the pending and firing alerts.
	Alerts int
}

// Summarize reduces a rule's alerts to its state: firing if any alert fires, else pending if
// any is pending; ActiveSince is the earliest ActiveAt among the alerts in that state and
// Value the value of that alert.
func Summarize(alerts map[uint64]Alert) Summary {
	s := Summary{State: StateInactive}
	for _, h := range slices.Sorted(maps.Keys(alerts)) {
		a := alerts[h]
		if a.State == StateInactive {
			continue
		}
		s.Alerts++
		switch {
		case a.State.rank() > s.State.rank(),
			a.State == s.State && a.ActiveAt.Before(s.ActiveSince):
			s.State, s.ActiveSince, s.Value = a.State, a.ActiveAt, a.Value
		}
	}
	return s
}

func alertLabels(name string, series labels.Labels, extra map[string]string) labels.Labels {
	b := labels.NewBuilder(series)
	b.Del(labels.MetricName)
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		b.Set(k, extra[k])
	}
	b.Set(LabelAlertName, name)
	return b.Labels()
}

// templatePrelude defines $labels and $value for annotation templates, as Prometheus does.
const templatePrelude = "{{$labels := .Labels}}{{$value := .Value}}"

// ValidateTemplate parses an annotation template ($labels and $value defined).
func ValidateTemplate(text string) error {
	_, err := template.New("annotation").Parse(templatePrelude + text)
	return err
}

// expand renders annotation templates with $labels and $value, as Prometheus does; a
// template that does not parse or fails is kept as written.
func expand(annotations map[string]string, lset labels.Labels, v float64) map[string]string {
	if len(annotations) == 0 {
		return nil
	}
	out := make(map[string]string, len(annotations))
	data := struct {
		Labels map[string]string
		Value  float64
	}{lset.Map(), v}
	for k, text := range annotations {
		out[k] = text
		if !strings.Contains(text, "{{") {
			continue
		}
		t, err := template.New(k).Option("missingkey=zero").Parse(templatePrelude + text)
		if err != nil {
			continue
		}
		var sb strings.Builder
		if err := t.Execute(&sb, data); err == nil {
			out[k] = sb.String()
		}
	}
	return out
}
