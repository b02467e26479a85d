package eventbus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// benchmarkThroughput publishes b.N events to one subscription and waits until the handler
// has processed all of them: end-to-end events/s.
func benchmarkThroughput(b *testing.B, bus Bus) {
	var processed atomic.Int64
	must(b, bus.Subscribe(Subscription{Topic: "lifecycle", Group: "bench", Handler: func(context.Context, Event) error {
		processed.Add(1)
		return nil
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.Start(ctx) }()
	defer func() { cancel(); <-done }()
	e := Event{Type: "phase_changed", Kind: "Credential", Namespace: "tenant-a-prod", Name: "db-password",
		UID: "5f0c8a52-7d4b-4f3e-9a0f-1d2e3c4b5a69", From: "Reconciling", To: "Active", Reason: "Provisioned",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Time: time.Unix(1700000000, 0)}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for {
			err := bus.Publish(ctx, "lifecycle", e)
			if err == nil {
				break
			}
			time.Sleep(time.Millisecond) // outbox full: let the flusher catch up
		}
	}
	for processed.Load() < int64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

func BenchmarkMemoryThroughput(b *testing.B) {
	bus, err := NewMemory(Options{Registerer: prometheus.NewRegistry(), PublishTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkThroughput(b, bus)
}

func BenchmarkRedisThroughput(b *testing.B) {
	r := startRedis(b)
	bus, err := NewRedis(Options{RedisAddr: r.addr(), Registerer: prometheus.NewRegistry(), ReadBlock: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkThroughput(b, bus)
}
