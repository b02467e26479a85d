package eventbus

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	events     *prometheus.CounterVec
	processing *prometheus.HistogramVec
	queue      *prometheus.GaugeVec
	up         prometheus.Gauge
}

// newMetrics builds and registers the bus metrics, pre-initialised for the known types and
// topics. A collector already registered by another bus on the same registerer is reused.
func newMetrics(reg prometheus.Registerer, backend string, types, topics []string) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventbus_events_total",
			Help: "Events by type and status (published, processed, failed, dropped, buffered).",
		}, []string{"type", "status"}),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventbus_processing_seconds",
			Help:    "Time a subscriber's handler took per event.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5},
		}, []string{"type"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventbus_queue_length",
			Help: "Events held in this process waiting for delivery (memory: subscriber buffers; redis: the outbox).",
		}, []string{"topic"}),
	}
	upVec := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_eventbus_backend_up",
		Help: "1 when the event bus backend is reachable, 0 while events are being buffered.",
	}, []string{"backend"})
	if reg != nil {
		var err error
		if m.events, err = register(reg, m.events); err != nil {
			return nil, err
		}
		if m.processing, err = register(reg, m.processing); err != nil {
			return nil, err
		}
		if m.queue, err = register(reg, m.queue); err != nil {
			return nil, err
		}
		if upVec, err = register(reg, upVec); err != nil {
			return nil, err
		}
	}
	m.up = upVec.WithLabelValues(backend)
	m.up.Set(1)
	for _, t := range types {
		for _, s := range statuses {
			m.events.WithLabelValues(t, s)
		}
		m.processing.WithLabelValues(t)
	}
	for _, t := range topics {
		m.queue.WithLabelValues(t)
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
