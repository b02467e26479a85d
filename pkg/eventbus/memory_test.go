package eventbus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector gathers events by name, safe for concurrent handlers.
type collector struct {
	mu     sync.Mutex
	byName map[string]int
	events []Event
}

func newCollector() *collector { return &collector{byName: map[string]int{}} }

func (c *collector) handle(_ context.Context, e Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byName[e.Name]++
	c.events = append(c.events, e)
	return nil
}

func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byName)
}

func (c *collector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run starts bus in the background and stops it (waiting for Start to return) at cleanup.
func run(t *testing.T, bus Bus) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Start did not return within 10s of cancel")
		}
	})
}

func TestMemoryFanOutToGroupsAndShareWithinGroup(t *testing.T) {
	reg := prometheus.NewRegistry()
	bus, err := New(Options{Registerer: reg, Types: []string{"phase_changed"}, Topics: []string{"lifecycle"}})
	if err != nil {
		t.Fatal(err)
	}
	audit, workers := newCollector(), newCollector()
	must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "audit", Handler: audit.handle}))
	for range 3 { // three members share group "workers"
		must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "workers", Handler: workers.handle}))
	}
	run(t, bus)
	ctx := context.Background()
	for i := range 100 {
		must(t, bus.Publish(ctx, "lifecycle", Event{Type: "phase_changed", Kind: "Tenant", Name: name(i), From: "Pending", To: "Reconciling"}))
	}
	must(t, bus.Publish(ctx, "other", Event{Type: "phase_changed", Name: "elsewhere"}))
	waitFor(t, 5*time.Second, "200 deliveries", func() bool { return audit.total() == 100 && workers.total() == 100 })
	if audit.distinct() != 100 || workers.distinct() != 100 {
		t.Fatalf("each group must see each event once: audit %d, workers %d distinct", audit.distinct(), workers.distinct())
	}
	e := audit.events[0]
	if len(e.TraceID) != 32 || e.Time.IsZero() || e.Kind != "Tenant" || e.From != "Pending" || e.To != "Reconciling" {
		t.Fatalf("event not filled in as published: %+v", e)
	}
	if got := value(t, reg, "eventbus_events_total", "type", "phase_changed", "status", StatusProcessed); got != 200 {
		t.Fatalf("processed = %v, want 200", got)
	}
	if got := value(t, reg, "eventbus_events_total", "type", "phase_changed", "status", StatusPublished); got != 101 {
		t.Fatalf("published = %v, want 101", got)
	}
}

func TestMemoryFullBufferDropsAfterTimeout(t *testing.T) {
	reg := prometheus.NewRegistry()
	bus, err := NewMemory(Options{Registerer: reg, BufferSize: 2, PublishTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	must(t, bus.Subscribe(Subscription{Topic: "t", Handler: func(ctx context.Context, e Event) error {
		entered <- struct{}{}
		<-release
		return nil
	}}))
	run(t, bus)
	defer close(release)
	ctx := context.Background()
	must(t, bus.Publish(ctx, "t", Event{Type: "a", Name: "1"}))
	<-entered // the handler holds event 1; the buffer (2) is empty again
	must(t, bus.Publish(ctx, "t", Event{Type: "a", Name: "2"}))
	must(t, bus.Publish(ctx, "t", Event{Type: "a", Name: "3"}))
	start := time.Now()
	err = bus.Publish(ctx, "t", Event{Type: "a", Name: "4"})
	if !errors.Is(err, ErrBufferFull) {
		t.Fatalf("publish into a full buffer: %v, want ErrBufferFull", err)
	}
	if waited := time.Since(start); waited < 40*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("publish waited %s, want about PublishTimeout (50ms)", waited)
	}
	if got := value(t, reg, "eventbus_events_total", "type", "a", "status", StatusDropped); got != 1 {
		t.Fatalf("dropped = %v, want 1", got)
	}
	if got := value(t, reg, "eventbus_queue_length", "topic", "t"); got != 2 {
		t.Fatalf("queue length = %v, want 2", got)
	}
}

func TestPublishValidatesEvent(t *testing.T) {
	bus, err := NewMemory(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic, typ string
		ok         bool
	}{
		{"t", "credential_rotated", true},
		{"t", "phase_changed2", true},
		{"t", "x", true},
		{"t", "", false},
		{"t", "CredentialRotated", false},
		{"t", "credential-rotated", false},
		{"t", "credential__rotated", false},
		{"t", "_rotated", false},
		{"t", "rotated_", false},
		{"", "ok", false},
	} {
		err := bus.Publish(context.Background(), tc.topic, Event{Type: tc.typ})
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrInvalidEvent)) {
			t.Errorf("Publish(%q, %q) = %v, want ok=%v", tc.topic, tc.typ, err, tc.ok)
		}
	}
	if err := bus.Subscribe(Subscription{Topic: "t"}); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("subscription without handler: %v", err)
	}
	if _, err := New(Options{Backend: "kafka"}); err == nil {
		t.Errorf("unknown backend accepted")
	}
	if _, err := New(Options{Backend: BackendRedis}); err == nil {
		t.Errorf("redis backend without an address accepted")
	}
}

func TestMetricsPreinitialised(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMemory(Options{Registerer: reg, Types: []string{"credential_rotated"}, Topics: []string{"lifecycle"}}); err != nil {
		t.Fatal(err)
	}
	// A second bus on the same registerer shares the collectors instead of failing.
	if _, err := NewMemory(Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		found[mf.GetName()] = true
		if mf.GetName() == "eventbus_events_total" && len(mf.GetMetric()) != len(statuses) {
			t.Errorf("eventbus_events_total has %d series, want one per status (%d)", len(mf.GetMetric()), len(statuses))
		}
		if mf.GetName() == "eventbus_processing_seconds" {
			bounds := map[float64]bool{}
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				bounds[b.GetUpperBound()] = true
			}
			for _, want := range []float64{0.01, 0.1, 1} {
				if !bounds[want] {
					t.Errorf("eventbus_processing_seconds lacks bucket %v", want)
				}
			}
		}
	}
	for _, n := range []string{"eventbus_events_total", "eventbus_processing_seconds", "eventbus_queue_length", "kube_eventbus_backend_up"} {
		if !found[n] {
			t.Errorf("metric %s not exposed before any event", n)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func name(i int) string { return "obj-" + itoa(i) }

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

// value gathers reg and returns the value of metric with the given label pairs.
func value(t testing.TB, reg *prometheus.Registry, metric string, kv ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i < len(kv); i += 2 {
				if labels[kv[i]] != kv[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("metric %s%v not found", metric, kv)
	return 0
}
