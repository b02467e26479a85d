package alerting

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kubeos.dev/kube/pkg/eventbus"
)

type hook struct {
	mu   sync.Mutex
	msgs []WebhookMessage
	am   [][]PostableAlert
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch r.URL.Path {
	case "/api/v2/alerts":
		var pa []PostableAlert
		if err := json.NewDecoder(r.Body).Decode(&pa); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h.am = append(h.am, pa)
	default:
		var m WebhookMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h.msgs = append(h.msgs, m)
	}
}

func (h *hook) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.msgs), len(h.am)
}

type busRecorder struct {
	mu     sync.Mutex
	events []eventbus.Event
}

func (b *busRecorder) Publish(_ context.Context, topic string, e eventbus.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if topic == Topic {
		b.events = append(b.events, e)
	}
	return nil
}

// TestEvaluatorOverGatherer drives a gauge through a rule over the evaluator's own samples:
// pending, firing after for, resolved, with webhook and Alertmanager notifications.
func TestEvaluatorOverGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_queue_depth", Help: "h"}, []string{"queue"})
	reg.MustRegister(g)
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	bus := &busRecorder{}
	ev, err := New(Options{Gatherer: reg, Interval: 15 * time.Second, Bus: bus, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ev.Set(Rule{Key: "ns/deep", Namespace: "ns", Name: "QueueDeep", Expr: `max_over_time(test_queue_depth[1m]) > 10`, For: 30 * time.Second,
		Labels: map[string]string{"severity": "warning"}, Annotations: map[string]string{"summary": "queue {{ $labels.queue }} is {{ $value }} deep"},
		Receivers: []Notifier{&Webhook{URL: srv.URL + "/hook?token=s3cret"}, &Alertmanager{URL: srv.URL}}, GeneratorURL: "https://kube/alerts/ns/deep"})
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	step := func(sec int, v float64, want State) RuleStatus {
		t.Helper()
		g.WithLabelValues("jobs").Set(v)
		ev.EvaluateOnce(ctx, at(sec))
		st, ok := ev.Status("ns/deep")
		if !ok || st.State != want || st.LastError != "" || !st.LastEvaluation.Equal(at(sec)) {
			t.Fatalf("t=%d: status %+v, want %s", sec, st, want)
		}
		return st
	}
	step(0, 1, StateInactive)
	step(15, 20, StatePending)
	if n, _ := h.counts(); n != 0 {
		t.Fatalf("pending notified: %d", n)
	}
	step(30, 20, StatePending)
	st := step(45, 20, StateFiring)
	if !st.ActiveSince.Equal(at(15)) || st.Value != 20 {
		t.Fatalf("firing status %+v", st)
	}
	n, am := h.counts()
	if n != 1 || am != 1 {
		t.Fatalf("after firing: %d webhooks, %d alertmanager posts", n, am)
	}
	m := h.msgs[0]
	if m.Version != "4" || m.Status != "firing" || len(m.Alerts) != 1 || m.GroupLabels["alertname"] != "QueueDeep" {
		t.Fatalf("webhook %+v", m)
	}
	a := m.Alerts[0]
	if a.Status != "firing" || a.Labels["queue"] != "jobs" || a.Labels["severity"] != "warning" || a.Labels["alertname"] != "QueueDeep" ||
		a.Annotations["summary"] != "queue jobs is 20 deep" || !a.StartsAt.Equal(at(15)) || !a.EndsAt.IsZero() ||
		a.GeneratorURL != "https://kube/alerts/ns/deep" || a.Fingerprint != Fingerprint(a.Labels) || len(a.Fingerprint) != 16 {
		t.Fatalf("webhook alert %+v", a)
	}
	if pa := h.am[0][0]; pa.EndsAt.Before(at(45).Add(time.Minute)) || pa.Labels["queue"] != "jobs" {
		t.Fatalf("alertmanager alert %+v", pa)
	}
	// Still firing: the webhook hears nothing new, the Alertmanager gets a resend after a minute.
	step(60, 20, StateFiring)
	step(105, 20, StateFiring)
	if n, am := h.counts(); n != 1 || am != 2 {
		t.Fatalf("while firing: %d webhooks, %d alertmanager posts", n, am)
	}
	// max_over_time over 1m still sees 20 until the window passes.
	g.WithLabelValues("jobs").Set(0)
	step(120, 0, StateFiring)
	step(180, 0, StateInactive)
	n, am = h.counts()
	if n != 2 || am != 3 {
		t.Fatalf("after resolve: %d webhooks, %d alertmanager posts", n, am)
	}
	if m := h.msgs[1]; m.Status != "resolved" || m.Alerts[0].Status != "resolved" || !m.Alerts[0].EndsAt.Equal(at(180)) {
		t.Fatalf("resolved webhook %+v", m)
	}
	bus.mu.Lock()
	defer bus.mu.Unlock()
	if len(bus.events) != 2 || bus.events[0].Type != EventFiring || bus.events[1].Type != EventResolved || bus.events[0].Name != "QueueDeep" {
		t.Fatalf("bus events %+v", bus.events)
	}
}

func TestEvaluatorErrors(t *testing.T) {
	ev, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", 503) }))
	defer failing.Close()
	ev.Set(Rule{Key: "a", Name: "Always", Expr: `vector(1)`, Receivers: []Notifier{&Webhook{URL: failing.URL + "/x?token=s3cret"}}})
	ev.Set(Rule{Key: "b", Name: "Bad", Expr: `foo[5m]`})
	ev.Set(Rule{Key: "c", Name: "Remote", Expr: `up`, Prometheus: failing.URL})
	ev.EvaluateOnce(context.Background(), time.Now())
	a, _ := ev.Status("a")
	if a.State != StateFiring || a.LastError == "" || strings.Contains(a.LastError, "s3cret") {
		t.Fatalf("notification error: %+v", a)
	}
	b, _ := ev.Status("b")
	if b.LastError == "" || b.State != StateInactive {
		t.Fatalf("range vector rule: %+v", b)
	}
	c, _ := ev.Status("c")
	if c.LastError == "" {
		t.Fatalf("unreachable prometheus: %+v", c)
	}
	ev.Remove("a")
	if _, ok := ev.Status("a"); ok || len(ev.Keys()) != 2 {
		t.Fatalf("remove: %v", ev.Keys())
	}
}
