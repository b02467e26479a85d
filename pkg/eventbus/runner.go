package eventbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errAlreadyStarted is returned by a second Start.
var errAlreadyStarted = errors.New("eventbus: already started")

// runner owns the goroutines of one Start: the ones known at Start and those of
// subscriptions added while it runs. It stops them all when ctx ends, before Start returns.
type runner struct {
	mu      sync.Mutex
	queued  []func(context.Context)
	started bool
	wake    chan struct{}
}

func newRunner() runner { return runner{wake: make(chan struct{}, 1)} }

// add schedules f to run under Start's context (now, if Start is running).
func (r *runner) add(f func(context.Context)) {
	r.mu.Lock()
	r.queued = append(r.queued, f)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *runner) run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errAlreadyStarted
	}
	r.started = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for {
		r.mu.Lock()
		q := r.queued
		r.queued = nil
		r.mu.Unlock()
		for _, f := range q {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(ctx)
			}()
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-r.wake:
		}
	}
}

// handle runs h on e, timing it and counting the outcome; a panicking handler counts as failed.
func handle(ctx context.Context, m *metrics, h Handler, e Event) (err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("eventbus: handler panicked: %v", p)
		}
		m.processing.WithLabelValues(e.Type).Observe(time.Since(start).Seconds())
		if err != nil {
			m.events.WithLabelValues(e.Type, StatusFailed).Inc()
		} else {
			m.events.WithLabelValues(e.Type, StatusProcessed).Inc()
		}
	}()
	return h(ctx, e)
}
