package eventbus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Memory is the in-process backend. See the package documentation for its delivery policy.
type Memory struct {
	opts Options
	m    *metrics
	run  runner

	mu     sync.RWMutex
	groups map[string][]*memGroup // by topic
}

type memGroup struct {
	name  string
	ch    chan Event
	queue prometheus.Gauge // eventbus_queue_length{topic}
}

var _ Bus = (*Memory)(nil)

// NewMemory builds an in-memory bus.
func NewMemory(opts Options) (*Memory, error) {
	opts.Backend = BackendMemory
	opts.Complete()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, BackendMemory, opts.Types, opts.Topics)
	if err != nil {
		return nil, err
	}
	return &Memory{opts: opts, m: m, run: newRunner(), groups: map[string][]*memGroup{}}, nil
}

// Publish delivers e to every subscription group of topic. It waits at most
// Options.PublishTimeout (or until ctx ends) for room in a full group buffer and then drops the
// event for that group, returning ErrBufferFull.
func (b *Memory) Publish(ctx context.Context, topic string, e Event) error {
	if err := prepare(topic, &e, b.opts.Now); err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	var dropped int
	var timer *time.Timer
	for _, g := range b.groups[topic] {
		select {
		case g.ch <- e:
			g.queue.Inc()
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(b.opts.PublishTimeout)
			defer timer.Stop()
		}
		select {
		case g.ch <- e:
			g.queue.Inc()
		case <-timer.C:
			dropped++
		case <-ctx.Done():
			dropped++
		}
	}
	b.m.events.WithLabelValues(e.Type, StatusPublished).Inc()
	if dropped > 0 {
		b.m.events.WithLabelValues(e.Type, StatusDropped).Add(float64(dropped))
		return fmt.Errorf("topic %q: %d subscription group(s): %w", topic, dropped, ErrBufferFull)
	}
	return nil
}

// Subscribe adds a member to s.Group on s.Topic; members of one group share its events.
func (b *Memory) Subscribe(s Subscription) error {
	if err := checkSubscription(&s); err != nil {
		return err
	}
	b.mu.Lock()
	var g *memGroup
	for _, x := range b.groups[s.Topic] {
		if x.name == s.Group {
			g = x
		}
	}
	if g == nil {
		g = &memGroup{name: s.Group, ch: make(chan Event, b.opts.BufferSize), queue: b.m.queue.WithLabelValues(s.Topic)}
		b.groups[s.Topic] = append(b.groups[s.Topic], g)
	}
	b.mu.Unlock()
	b.run.add(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-g.ch:
				g.queue.Dec()
				_ = handle(ctx, b.m, s.Handler, e)
			}
		}
	})
	return nil
}

// Start runs the subscribers until ctx ends. Events still buffered then are discarded.
func (b *Memory) Start(ctx context.Context) error { return b.run.run(ctx) }

// Healthy is always nil: memory cannot be unreachable.
func (b *Memory) Healthy() error { return nil }
