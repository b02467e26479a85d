package alerting

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

func TestStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	series := Sample{Labels: labels.FromStrings("__name__", "up", "job", "a"), Value: 1}
	type round struct {
		sec     int
		present bool
		want    State // the alert's state after the round ("" = gone)
		tr      []State
	}
	cases := []struct {
		name          string
		forD, keepFor time.Duration
		rounds        []round
	}{
		{"for 0 fires at once", 0, 0, []round{
			{0, true, StateFiring, []State{StatePending, StateFiring}},
			{15, false, StateInactive, []State{StateInactive}},
		}},
		{"pending then firing after for, then resolved", 30 * time.Second, 0, []round{
			{0, true, StatePending, []State{StatePending}},
			{15, true, StatePending, nil},
			{30, true, StateFiring, []State{StateFiring}},
			{45, true, StateFiring, nil},
			{60, false, StateInactive, []State{StateInactive}},
		}},
		{"pending that vanishes is dropped, and starts over", 30 * time.Second, 0, []round{
			{0, true, StatePending, []State{StatePending}},
			{15, false, "", []State{StateInactive}},
			{30, true, StatePending, []State{StatePending}},
			{45, true, StatePending, nil},
			{60, true, StateFiring, []State{StateFiring}},
		}},
		{"keepFiringFor holds a vanished firing alert", 0, 30 * time.Second, []round{
			{0, true, StateFiring, []State{StatePending, StateFiring}},
			{15, false, StateFiring, nil},
			{30, false, StateFiring, nil},
			{45, false, StateInactive, []State{StateInactive}},
		}},
		{"keepFiringFor resets when the series returns", 0, 30 * time.Second, []round{
			{0, true, StateFiring, []State{StatePending, StateFiring}},
			{15, false, StateFiring, nil},
			{30, true, StateFiring, nil},
			{45, false, StateFiring, nil},
			{60, false, StateFiring, nil},
			{75, false, StateInactive, []State{StateInactive}},
		}},
		{"resolved is kept for the retention, then forgotten; a return is a new alert", 0, 0, []round{
			{0, true, StateFiring, []State{StatePending, StateFiring}},
			{15, false, StateInactive, []State{StateInactive}},
			{15 + 15*60, false, StateInactive, nil},
			{16 + 15*60, false, "", nil},
			{20 + 15*60, true, StateFiring, []State{StatePending, StateFiring}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			alerts := map[uint64]Alert{}
			for _, r := range c.rounds {
				in := StepInput{Name: "Up", For: c.forD, KeepFiringFor: c.keepFor, Labels: map[string]string{"severity": "page"}, Now: at(r.sec)}
				if r.present {
					in.Results = []Sample{series}
				}
				var tr []Transition
				alerts, tr = Step(alerts, in)
				var got State
				for _, a := range alerts {
					got = a.State
					if a.Labels.Get("alertname") != "Up" || a.Labels.Get("severity") != "page" || a.Labels.Has("__name__") || a.Labels.Get("job") != "a" {
						t.Fatalf("t=%d: labels %s", r.sec, a.Labels)
					}
				}
				if got != r.want || len(alerts) > 1 {
					t.Fatalf("t=%d: state %q (%d alerts), want %q", r.sec, got, len(alerts), r.want)
				}
				var tos []State
				for _, x := range tr {
					tos = append(tos, x.To)
				}
				if len(tos) != len(r.tr) {
					t.Fatalf("t=%d: transitions %v, want %v", r.sec, tos, r.tr)
				}
				for i := range tos {
					if tos[i] != r.tr[i] {
						t.Fatalf("t=%d: transitions %v, want %v", r.sec, tos, r.tr)
					}
				}
			}
		})
	}
}

func TestStepTimestampsAndAnnotations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Sample{Labels: labels.FromStrings("kind", "Tenant"), Value: 3}
	in := StepInput{Name: "A", For: 10 * time.Second, Annotations: map[string]string{"summary": "{{ $labels.kind }} at {{ $value }}", "bad": "{{"},
		Results: []Sample{s}, Now: t0}
	a1, _ := Step(nil, in)
	in.Now = t0.Add(10 * time.Second)
	a2, _ := Step(a1, in)
	in.Results, in.Now = nil, t0.Add(20*time.Second)
	a3, _ := Step(a2, in)
	for _, a := range a2 {
		if a.State != StateFiring || !a.ActiveAt.Equal(t0) || !a.FiredAt.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("firing alert %+v", a)
		}
		if a.Annotations["summary"] != "Tenant at 3" || a.Annotations["bad"] != "{{" {
			t.Fatalf("annotations %v", a.Annotations)
		}
	}
	for _, a := range a3 {
		if a.State != StateInactive || !a.ResolvedAt.Equal(t0.Add(20*time.Second)) {
			t.Fatalf("resolved alert %+v", a)
		}
	}
	if len(a1) != 1 || len(a2) != 1 || len(a3) != 1 {
		t.Fatalf("alerts %d %d %d", len(a1), len(a2), len(a3))
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		alerts []Alert
		want   Summary
	}{
		{"none", nil, Summary{State: StateInactive}},
		{"resolved only", []Alert{{State: StateInactive, ActiveAt: t0}}, Summary{State: StateInactive}},
		{"firing wins over an earlier pending", []Alert{{State: StatePending, ActiveAt: t0, Value: 1}, {State: StateFiring, ActiveAt: t0.Add(time.Minute), Value: 2}},
			Summary{State: StateFiring, ActiveSince: t0.Add(time.Minute), Value: 2, Alerts: 2}},
		{"earliest of the same state", []Alert{{State: StatePending, ActiveAt: t0.Add(time.Minute), Value: 1}, {State: StatePending, ActiveAt: t0, Value: 5}},
			Summary{State: StatePending, ActiveSince: t0, Value: 5, Alerts: 2}},
	}
	for _, c := range cases {
		m := map[uint64]Alert{}
		for i, a := range c.alerts {
			m[uint64(i)] = a
		}
		if got := Summarize(m); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestValidateExpr(t *testing.T) {
	for _, ok := range []string{`up == 0`, `rate(kube_lifecycle_transitions_total[5m]) > 1`, `sum by (kind) (kube_lifecycle_phase{phase="Failed"}) > 0`, `1`} {
		if err := ValidateExpr(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{``, `rate(up[5m]`, `up ==`, `sum by kind (up)`, `foo{`} {
		if err := ValidateExpr(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestValidateTemplate(t *testing.T) {
	if err := ValidateTemplate("{{ $labels.kind }} is {{ $value }}"); err != nil {
		t.Error(err)
	}
	if err := ValidateTemplate("{{ $labels.kind "); err == nil {
		t.Error("an unclosed action parsed")
	}
}
