package scheduler

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are kube-scheduler's own names (pkg/scheduler/metrics), so dashboards and alerts
// written for it read Kube's.
type metrics struct {
	attempts    *prometheus.CounterVec
	attemptSecs *prometheus.HistogramVec
	pendingPods *prometheus.GaugeVec
	sli         *prometheus.HistogramVec
}

// Attempt results, as upstream labels them.
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"
)

func newMetrics(reg prometheus.Registerer, profiles []string) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "scheduler", Name: "schedule_attempts_total",
			Help: "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem."},
			[]string{"result", "profile"}),
		attemptSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "scheduler", Name: "scheduling_attempt_duration_seconds",
			Help: "Scheduling attempt latency in seconds (scheduling algorithm + binding)", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)},
			[]string{"result", "profile"}),
		pendingPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "scheduler", Name: "pending_pods",
			Help: "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated."},
			[]string{"queue"}),
		sli: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "scheduler", Name: "pod_scheduling_sli_duration_seconds",
			Help:    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20)},
			[]string{"attempts"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.attempts, m.attemptSecs, m.pendingPods, m.sli} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, err
				}
			}
		}
	}
	// Pre-initialised to 0, so a scrape shows every series before the first pod.
	for _, p := range profiles {
		for _, r := range []string{resultScheduled, resultUnschedulable, resultError} {
			m.attempts.WithLabelValues(r, p)
		}
	}
	m.pending(0, 0, 0, 0)
	return m, nil
}

func (m *metrics) pending(active, backoff, unsched, gated int) {
	m.pendingPods.WithLabelValues("active").Set(float64(active))
	m.pendingPods.WithLabelValues("backoff").Set(float64(backoff))
	m.pendingPods.WithLabelValues("unschedulable").Set(float64(unsched))
	m.pendingPods.WithLabelValues("gated").Set(float64(gated))
}

func (m *metrics) attempt(result, profile string, seconds float64) {
	m.attempts.WithLabelValues(result, profile).Inc()
	m.attemptSecs.WithLabelValues(result, profile).Observe(seconds)
}

func (m *metrics) scheduled(attempts int, seconds float64) {
	l := "15+"
	if attempts < 15 {
		l = strconv.Itoa(attempts)
	}
	m.sli.WithLabelValues(l).Observe(seconds)
}
