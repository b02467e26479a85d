package eviction

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Options configure a Manager.
type Options struct {
	// Hard are the hard eviction thresholds (ParseThresholds of --eviction-hard).
	Hard []Threshold
	// Summary measures the node (stats.Provider.Summary).
	Summary func(ctx context.Context, cpuAndMemoryOnly bool) (*statsapi.Summary, error)
	// Pods are the pods bound to the node.
	Pods func() []*corev1.Pod
	// Kill stops a pod and writes its terminal status (pods.Manager.Kill).
	Kill func(ctx context.Context, uid types.UID, grace int64, reason, message string) error
	// Interval is how often the node is measured (default 10 s, the kubelet's).
	Interval time.Duration
	// PressureTransitionPeriod is how long a pressure condition stays after its signal
	// recovered (default 5 min, the kubelet's --eviction-pressure-transition-period).
	PressureTransitionPeriod time.Duration
	// Changed is called when the pressure conditions change (the node status is written).
	Changed func()
	// Registerer gets kube_agent_evictions_total{signal}; nil: none.
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Manager is the eviction loop.
type Manager struct {
	opts      Options
	evictions *prometheus.CounterVec

	mu       sync.Mutex
	pressure Pressure
	lastMet  map[Signal]time.Time
}

// NewManager makes a Manager; Start runs it.
func NewManager(o Options) *Manager {
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	if o.PressureTransitionPeriod == 0 {
		o.PressureTransitionPeriod = 5 * time.Minute
	}
	if o.Changed == nil {
		o.Changed = func() {}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: o, lastMet: map[Signal]time.Time{}}
	m.evictions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_agent_evictions_total",
		Help: "Pods the node agent evicted, by eviction signal."}, []string{"signal"})
	for _, s := range []string{string(MemoryAvailable), string(NodeFsAvailable), string(NodeFsInodesFree), string(ImageFsAvailable), string(ImageFsInodesFree), "ephemeralstoragelimit"} {
		m.evictions.WithLabelValues(s)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(m.evictions)
	}
	return m
}

// Pressure is the node's pressure conditions now.
func (m *Manager) Pressure() Pressure {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pressure
}

// Start measures and evicts every Interval until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	tick := time.NewTicker(m.opts.Interval)
	defer tick.Stop()
	for {
		m.pass(ctx, time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pass is one measurement: the pressure conditions, the local storage limits, then at
// most one pod evicted for a met threshold.
func (m *Manager) pass(ctx context.Context, now time.Time) {
	s, err := m.opts.Summary(ctx, false)
	if err != nil {
		if ctx.Err() == nil {
			m.opts.Log.Warn("eviction: measure the node", "err", err)
		}
		return
	}
	obs := Observe(s)
	met := Met(m.opts.Hard, obs)
	m.setPressure(met, now)

	stats := map[types.UID]*statsapi.PodStats{}
	for i := range s.Pods {
		stats[types.UID(s.Pods[i].PodRef.UID)] = &s.Pods[i]
	}
	var active []*corev1.Pod
	for _, p := range m.opts.Pods() {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		if _, running := stats[p.UID]; running {
			active = append(active, p)
		}
	}
	evicted := false
	for _, p := range active {
		if msg := LocalStorageViolation(p, stats[p.UID]); msg != "" {
			m.evict(ctx, p, immediateEvictionSeconds, msg, "ephemeralstoragelimit")
			evicted = true
		}
	}
	if evicted || len(met) == 0 {
		return
	}
	t := met[0]
	res := resourceOf[t.Signal]
	o := obs[t.Signal]
	for _, p := range Rank(active, stats, res) {
		if isCritical(p) {
			continue
		}
		m.evict(ctx, p, immediateEvictionSeconds, Message(res, p, stats[p.UID], t.QuantityOf(o.Capacity), o.Available), string(t.Signal))
		return
	}
}

// isCritical: the kubelet never evicts static or system-critical pods.
func isCritical(p *corev1.Pod) bool {
	return p.Spec.Priority != nil && *p.Spec.Priority >= 2000000000
}

func (m *Manager) evict(ctx context.Context, p *corev1.Pod, grace int64, msg, signal string) {
	m.opts.Log.Info("evicting pod", "pod", p.Namespace+"/"+p.Name, "signal", signal, "message", msg)
	if err := m.opts.Kill(ctx, p.UID, grace, Reason, msg); err != nil {
		m.opts.Log.Warn("eviction failed", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	m.evictions.WithLabelValues(signal).Inc()
}

// setPressure raises a condition while a threshold is met and keeps it for the transition
// period after.
func (m *Manager) setPressure(met []Threshold, now time.Time) {
	m.mu.Lock()
	for _, t := range met {
		m.lastMet[t.Signal] = now
	}
	var recent []Threshold
	for sig, at := range m.lastMet {
		if now.Sub(at) < m.opts.PressureTransitionPeriod {
			recent = append(recent, Threshold{Signal: sig})
		}
	}
	p := PressureOf(recent)
	changed := p != m.pressure
	m.pressure = p
	m.mu.Unlock()
	if changed {
		m.opts.Log.Info("node pressure", "memory", p.Memory, "disk", p.Disk)
		m.opts.Changed()
	}
}
