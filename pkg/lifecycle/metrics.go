package lifecycle

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus metrics, registered through the injected registerer.
type metrics struct {
	phase       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	illegal     *prometheus.CounterVec
	reconcile   *prometheus.HistogramVec
	stalled     *prometheus.CounterVec
	finalizers  *finalizerAges
}

func newMetrics(reg prometheus.Registerer, now func() time.Time) (*metrics, error) {
	m := &metrics{
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_lifecycle_phase",
			Help: "Managed objects per kind and phase."}, []string{"kind", "phase"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_lifecycle_transitions_total",
			Help: "Phase transitions written, per kind, from and to phase."}, []string{"kind", "from", "to"}),
		illegal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_lifecycle_illegal_transitions_total",
			Help: "Phase transitions the engine refused because the kind's transition table forbids them."}, []string{"kind"}),
		reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kube_lifecycle_reconcile_seconds",
			Help:    "Duration of one reconcile, per kind.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"kind"}),
		stalled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_lifecycle_deletion_stalled_total",
			Help: "Objects whose deletion took longer than the kind's deletion timeout."}, []string{"kind"}),
		finalizers: &finalizerAges{now: now, since: map[string]map[Ref]time.Time{},
			desc: prometheus.NewDesc("kube_lifecycle_finalizer_age_seconds",
				"Age of the oldest pending kubeos.dev/lifecycle finalizer (time since deletion was requested), per kind.",
				[]string{"kind"}, nil)},
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.phase, m.transitions, m.illegal, m.reconcile, m.stalled, m.finalizers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// initKind pre-initialises a kind's label sets to 0.
func (m *metrics) initKind(kind string) {
	for _, p := range Phases {
		m.phase.WithLabelValues(kind, string(p))
	}
	m.illegal.WithLabelValues(kind)
	m.stalled.WithLabelValues(kind)
	m.reconcile.WithLabelValues(kind)
	m.finalizers.init(kind)
}

// finalizerAges computes kube_lifecycle_finalizer_age_seconds at scrape time from the
// deletion timestamps of the objects still held by the finalizer.
type finalizerAges struct {
	desc  *prometheus.Desc
	now   func() time.Time
	mu    sync.Mutex
	since map[string]map[Ref]time.Time
}

func (f *finalizerAges) init(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since[kind] == nil {
		f.since[kind] = map[Ref]time.Time{}
	}
}

func (f *finalizerAges) set(r Ref, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since[r.Kind] == nil {
		f.since[r.Kind] = map[Ref]time.Time{}
	}
	f.since[r.Kind][r] = t
}

func (f *finalizerAges) clear(r Ref) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.since[r.Kind], r)
}

func (f *finalizerAges) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

func (f *finalizerAges) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for kind, m := range f.since {
		oldest := 0.0
		for _, t := range m {
			oldest = max(oldest, now.Sub(t).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, oldest, kind)
	}
}
