package eventbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

func newRedisBus(t *testing.T, r *redisServer, reg *prometheus.Registry, mod func(*Options)) *Redis {
	t.Helper()
	o := Options{RedisAddr: r.addr(), Registerer: reg, Types: []string{"phase_changed"}, Topics: []string{"lifecycle"},
		ReadBlock: 100 * time.Millisecond, RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	bus, err := NewRedis(o)
	if err != nil {
		t.Fatal(err)
	}
	return bus
}

func publishN(t *testing.T, bus Bus, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		must(t, bus.Publish(context.Background(), "lifecycle", Event{Type: "phase_changed", Kind: "Credential",
			Namespace: "ns", Name: name(i), UID: fmt.Sprint("uid-", i), From: "Reconciling", To: "Active", Reason: "Provisioned"}))
	}
}

func TestRedisDeliversToEachGroupAndAcknowledges(t *testing.T) {
	r := startRedis(t)
	reg := prometheus.NewRegistry()
	bus := newRedisBus(t, r, reg, nil)
	audit, workers := newCollector(), newCollector()
	must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "audit", Handler: audit.handle}))
	must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "workers", Consumer: "w1", Handler: workers.handle}))
	must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "workers", Consumer: "w2", Handler: workers.handle}))
	run(t, bus)
	publishN(t, bus, 0, 500)
	waitFor(t, 10*time.Second, "500 events in each group", func() bool { return audit.distinct() == 500 && workers.distinct() == 500 })
	e := audit.events[0]
	if e.Kind != "Credential" || e.Namespace != "ns" || e.UID == "" || e.From != "Reconciling" || e.To != "Active" ||
		e.Reason != "Provisioned" || len(e.TraceID) != 32 || e.Time.IsZero() {
		t.Fatalf("event did not survive the round trip: %+v", e)
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	ctx := context.Background()
	waitFor(t, 5*time.Second, "no pending entries", func() bool {
		for _, g := range []string{"audit", "workers"} {
			p, err := c.XPending(ctx, "kube:events:lifecycle", g).Result()
			if err != nil || p.Count != 0 {
				return false
			}
		}
		return true
	})
	if got := value(t, reg, "eventbus_events_total", "type", "phase_changed", "status", StatusPublished); got != 500 {
		t.Fatalf("published = %v, want 500", got)
	}
	if got := value(t, reg, "eventbus_events_total", "type", "phase_changed", "status", StatusProcessed); got < 1000 {
		t.Fatalf("processed = %v, want >= 1000", got)
	}
}

func TestRedisStreamIsTrimmed(t *testing.T) {
	r := startRedis(t)
	bus := newRedisBus(t, r, prometheus.NewRegistry(), func(o *Options) { o.MaxLen = 100 })
	run(t, bus)
	publishN(t, bus, 0, 2000)
	waitFor(t, 10*time.Second, "outbox flushed", func() bool { return bus.Buffered() == 0 })
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	n, err := c.XLen(context.Background(), "kube:events:lifecycle").Result()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole macro-nodes (100 entries by default), so allow some slack.
	if n < 100 || n > 400 {
		t.Fatalf("stream length %d after 2000 events with MaxLen 100", n)
	}
}

// A handler error leaves the entry pending; it is reclaimed (XAUTOCLAIM) and processed.
func TestRedisRedeliversAfterHandlerFailure(t *testing.T) {
	r := startRedis(t)
	reg := prometheus.NewRegistry()
	bus := newRedisBus(t, r, reg, func(o *Options) {
		o.ClaimMinIdle = 200 * time.Millisecond
		o.ClaimInterval = 50 * time.Millisecond
	})
	var mu sync.Mutex
	attempts := map[string]int{}
	ok := newCollector()
	must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "g", Handler: func(ctx context.Context, e Event) error {
		mu.Lock()
		attempts[e.Name]++
		n := attempts[e.Name]
		mu.Unlock()
		if n == 1 {
			return errors.New("transient failure")
		}
		return ok.handle(ctx, e)
	}}))
	run(t, bus)
	publishN(t, bus, 0, 20)
	waitFor(t, 10*time.Second, "all 20 events processed after a failure", func() bool { return ok.distinct() == 20 })
	if got := value(t, reg, "eventbus_events_total", "type", "phase_changed", "status", StatusFailed); got != 20 {
		t.Fatalf("failed = %v, want 20", got)
	}
}

// A consumer that stops before acknowledging resumes its pending entries when restarted under
// the same name, without waiting for them to go idle.
func TestRedisConsumerResumesAfterRestart(t *testing.T) {
	r := startRedis(t)
	first := newRedisBus(t, r, prometheus.NewRegistry(), func(o *Options) { o.ClaimMinIdle = time.Hour })
	var mu sync.Mutex
	seen := 0
	must(t, first.Subscribe(Subscription{Topic: "lifecycle", Group: "g", Consumer: "c1", Handler: func(ctx context.Context, e Event) error {
		mu.Lock()
		seen++
		mu.Unlock()
		return errors.New("crashed before acknowledging")
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Start(ctx) }()
	publishN(t, first, 0, 30)
	waitFor(t, 10*time.Second, "first consumer saw 30", func() bool { mu.Lock(); defer mu.Unlock(); return seen == 30 })
	cancel()
	must(t, <-done)

	second := newRedisBus(t, r, prometheus.NewRegistry(), func(o *Options) { o.ClaimMinIdle = time.Hour })
	got := newCollector()
	must(t, second.Subscribe(Subscription{Topic: "lifecycle", Group: "g", Consumer: "c1", Handler: got.handle}))
	run(t, second)
	publishN(t, second, 30, 40)
	waitFor(t, 10*time.Second, "restarted consumer processed 40", func() bool { return got.distinct() == 40 })
}

// Redis stops: events are buffered (bounded), Healthy reports it, the metrics say so; Redis
// comes back (empty: --save ""): nothing buffered is lost.
func TestRedisOutageBuffersAndRecovers(t *testing.T) {
	r := startRedis(t)
	reg := prometheus.NewRegistry()
	bus := newRedisBus(t, r, reg, func(o *Options) { o.BufferSize = 1000 })
	got := newCollector()
	must(t, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "g", Handler: got.handle}))
	run(t, bus)
	publishN(t, bus, 0, 50)
	waitFor(t, 10*time.Second, "50 events before the outage", func() bool { return got.distinct() == 50 })
	must(t, bus.Healthy())

	r.stop()
	waitFor(t, 10*time.Second, "Healthy to report the outage", func() bool { return bus.Healthy() != nil })
	if err := bus.Healthy(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Healthy() = %v, want ErrUnavailable", err)
	}
	publishN(t, bus, 50, 1050) // fills the outbox to its bound exactly
	err := bus.Publish(context.Background(), "lifecycle", Event{Type: "phase_changed", Name: "beyond-the-bound"})
	if !errors.Is(err, ErrBufferFull) {
		t.Fatalf("publish beyond the bound: %v, want ErrBufferFull", err)
	}
	if v := value(t, reg, "kube_eventbus_backend_up", "backend", "redis"); v != 0 {
		t.Fatalf("kube_eventbus_backend_up = %v during the outage", v)
	}
	if v := value(t, reg, "eventbus_queue_length", "topic", "lifecycle"); v != 1000 {
		t.Fatalf("eventbus_queue_length = %v during the outage, want 1000", v)
	}
	if v := value(t, reg, "eventbus_events_total", "type", "phase_changed", "status", StatusBuffered); v != 1000 {
		t.Fatalf("buffered = %v, want 1000", v)
	}

	r.start()
	waitFor(t, 20*time.Second, "all 1050 events after Redis returned", func() bool { return got.distinct() == 1050 })
	waitFor(t, 5*time.Second, "healthy again", func() bool { return bus.Healthy() == nil })
	if v := value(t, reg, "eventbus_queue_length", "topic", "lifecycle"); v != 0 {
		t.Fatalf("eventbus_queue_length = %v after recovery", v)
	}
	if v := value(t, reg, "kube_eventbus_backend_up", "backend", "redis"); v != 1 {
		t.Fatalf("kube_eventbus_backend_up = %v after recovery", v)
	}
	if got.byName["beyond-the-bound"] != 0 {
		t.Fatalf("the refused event was delivered")
	}
}
