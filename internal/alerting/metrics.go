package alerting

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	evaluations   *prometheus.CounterVec
	notifications *prometheus.CounterVec
	round         prometheus.Histogram
	rules         prometheus.Gauge
}

// Receiver types, the values of the receiver label of kube_alerting_notifications_total.
const (
	ReceiverWebhook      = "webhook"
	ReceiverAlertmanager = "alertmanager"
	ReceiverEvents       = "events"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_alerting_evaluations_total",
			Help: "Rule evaluations by result (ok, error)."}, []string{"result"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_alerting_notifications_total",
			Help: "Notifications sent by receiver type and result (ok, error)."}, []string{"receiver", "result"}),
		round: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kube_alerting_round_seconds",
			Help:    "Duration of one sampling and evaluation round over all rules.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15}}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kube_alerting_rules", Help: "Rules held by the evaluator."}),
	}
	for _, r := range []string{"ok", "error"} {
		m.evaluations.WithLabelValues(r)
		for _, t := range []string{ReceiverWebhook, ReceiverAlertmanager, ReceiverEvents} {
			m.notifications.WithLabelValues(t, r)
		}
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.evaluations, m.notifications, m.round, m.rules} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
