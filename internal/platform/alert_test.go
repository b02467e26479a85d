package platform

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kubeos.dev/kube/internal/alerting"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/eventbus"
	"kubeos.dev/kube/pkg/lifecycle"
)

func TestValidateAlert(t *testing.T) {
	cases := []struct {
		name string
		spec map[string]any
		want string // substring of the error; "" = valid
	}{
		{"valid", map[string]any{"expr": `up == 0`, "for": "5m", "receivers": []any{map[string]any{"webhook": map[string]any{"url": "https://hooks.example/x"}}, map[string]any{"events": map[string]any{}}}}, ""},
		{"parse error", map[string]any{"expr": `rate(up[5m]`}, "spec.expr"},
		{"parser's message", map[string]any{"expr": `sum by kind (up)`}, "unexpected identifier"},
		{"negative for", map[string]any{"expr": `up`, "for": "-1m"}, "spec.for"},
		{"bad label name", map[string]any{"expr": `up`, "labels": map[string]any{"bad-name": "x"}}, "spec.labels[bad-name]"},
		{"bad annotation template", map[string]any{"expr": `up`, "annotations": map[string]any{"summary": "{{ $labels.kind "}}, "spec.annotations[summary]"},
		{"two receiver kinds", map[string]any{"expr": `up`, "receivers": []any{map[string]any{"events": map[string]any{}, "webhook": map[string]any{"url": "http://a/b"}}}}, "spec.receivers[0]"},
		{"webhook not http", map[string]any{"expr": `up`, "receivers": []any{map[string]any{"webhook": map[string]any{"url": "ftp://a/b"}}}}, "spec.receivers[0].webhook.url"},
	}
	for _, c := range cases {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Alert",
			"metadata": map[string]any{"name": "a", "namespace": "n"}, "spec": c.spec}}
		errs := validateAlert(context.Background(), obj, nil)
		got := errs.ToAggregate()
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v", c.name, got)
		case c.want != "" && (got == nil || !strings.Contains(got.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, got, c.want)
		}
	}
}

// TestDefaultAlerts checks that the default Alerts are valid and name only metrics the engine
// and the event bus register.
func TestDefaultAlerts(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := lifecycle.NewEngine(lifecycle.EngineOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.Register(e, lifecycle.KindOptions[*v1alpha1.Alert]{Kind: "Alert", New: func() *v1alpha1.Alert { return &v1alpha1.Alert{} },
		Driver: nopDriver[*v1alpha1.Alert]{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eventbus.New(eventbus.Options{Registerer: reg, Types: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			names[mf.GetName()+"_bucket"], names[mf.GetName()+"_sum"], names[mf.GetName()+"_count"] = true, true, true
		}
	}
	seen := map[string]bool{}
	for _, a := range DefaultAlerts() {
		if seen[a.Name] {
			t.Fatalf("duplicate default alert %s", a.Name)
		}
		seen[a.Name] = true
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
		if err != nil {
			t.Fatal(err)
		}
		if errs := validateAlert(context.Background(), &unstructured.Unstructured{Object: u}, nil); len(errs) > 0 {
			t.Errorf("%s: %v", a.Name, errs.ToAggregate())
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(a.Spec.Expr)
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				for _, m := range vs.LabelMatchers {
					if m.Name == labels.MetricName && !names[m.Value] {
						t.Errorf("%s: metric %s is not registered by the engine or the bus", a.Name, m.Value)
					}
				}
			}
			return nil
		})
		if a.Namespace != "kube-system" || a.Labels[LabelDefaultAlert] != "true" {
			t.Errorf("%s: namespace %s labels %v", a.Name, a.Namespace, a.Labels)
		}
	}
}

// TestAlertRuntimeTerm: the evaluator runs while rules are renewed and stops, dropping them,
// once no reconcile has renewed them for alertLeaseRounds intervals (leadership lost).
func TestAlertRuntimeTerm(t *testing.T) {
	rt, err := newAlertRuntime(Options{Now: time.Now, Log: slog.New(slog.DiscardHandler)}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rt.set(alerting.Rule{Key: "ns/a", Name: "a", Expr: "vector(1)"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, ok := rt.ev.Status("ns/a")
		if ok && st.State == alerting.StateFiring {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rule not evaluated: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		rt.mu.Lock()
		running := rt.running
		rt.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the evaluator kept running without renewals")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := rt.ev.Status("ns/a"); ok {
		t.Fatal("an expired rule is still held")
	}
	rt.set(alerting.Rule{Key: "ns/b", Name: "b", Expr: "vector(1)"}) // a new term
	rt.Stop()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.running {
		t.Fatal("Stop left the evaluator running")
	}
}

// TestAlertRuntimeLeadershipLost: when the engine's leadership term ends, the evaluator
// stops at once and forgets its rules (no waiting for leases to lapse while a new leader
// evaluates too); the next term's first reconcile starts it again.
func TestAlertRuntimeLeadershipLost(t *testing.T) {
	var mu sync.Mutex
	termCtx, endTerm := context.WithCancel(context.Background())
	term := func() context.Context { mu.Lock(); defer mu.Unlock(); return termCtx }
	// A long interval: only the term's end can stop the run within the test.
	rt, err := newAlertRuntime(Options{Now: time.Now, Log: slog.New(slog.DiscardHandler), Term: term}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	rt.set(alerting.Rule{Key: "ns/a", Name: "a", Expr: "vector(1)"})
	running := func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.running }
	if !running() {
		t.Fatal("not running after a reconcile")
	}
	rt.mu.Lock()
	done := rt.done
	rt.mu.Unlock()
	endTerm()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the evaluator kept running after the term ended")
	}
	if running() || len(rt.ev.Keys()) != 0 {
		t.Fatalf("after the term: running %v, rules %v", running(), rt.ev.Keys())
	}
	mu.Lock()
	termCtx, endTerm = context.WithCancel(context.Background())
	mu.Unlock()
	defer endTerm()
	rt.set(alerting.Rule{Key: "ns/a", Name: "a", Expr: "vector(1)"})
	if !running() || len(rt.ev.Keys()) != 1 {
		t.Fatalf("next term: running %v, rules %v", running(), rt.ev.Keys())
	}
}
