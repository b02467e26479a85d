package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's, per Route (namespace, route); requests that match no Route
// count under route "".
type metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	upstream   *prometheus.CounterVec
	builds     prometheus.Counter
	routes     prometheus.Gauge
	bound      sync.Map // RouteKey → *routeMetrics
	codeLabels [6]string
}

// routeMetrics are one Route's series, bound once (the hot path does no label lookups).
type routeMetrics struct {
	duration prometheus.Observer
	codes    [6]prometheus.Counter // by status class 0..5 (0: other)
	connect  prometheus.Counter
	timeout  prometheus.Counter
	other    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_gateway_requests_total",
			Help: "Requests the gateway answered, per Route and status class"}, []string{"namespace", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kube_gateway_request_duration_seconds",
			Help: "Request latency through the gateway, per Route", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"namespace", "route"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_gateway_upstream_errors_total",
			Help: "Failed attempts to reach a backend, per Route and reason (connect, timeout, other)"}, []string{"namespace", "route", "reason"}),
		builds: prometheus.NewCounter(prometheus.CounterOpts{Name: "kube_gateway_table_builds_total",
			Help: "Route tables compiled and swapped in"}),
		routes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "kube_gateway_routes", Help: "Routes in the current table"}),
		codeLabels: [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"},
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.upstream, m.builds, m.routes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) route(k RouteKey) *routeMetrics {
	if v, ok := m.bound.Load(k); ok {
		return v.(*routeMetrics)
	}
	rm := &routeMetrics{duration: m.duration.WithLabelValues(k.Namespace, k.Name),
		connect: m.upstream.WithLabelValues(k.Namespace, k.Name, "connect"),
		timeout: m.upstream.WithLabelValues(k.Namespace, k.Name, "timeout"),
		other:   m.upstream.WithLabelValues(k.Namespace, k.Name, "other")}
	for i, l := range m.codeLabels {
		rm.codes[i] = m.requests.WithLabelValues(k.Namespace, k.Name, l)
	}
	v, _ := m.bound.LoadOrStore(k, rm)
	return v.(*routeMetrics)
}

// forget drops the series of Routes no longer in the table.
func (m *metrics) forget(keep map[RouteKey]*routeMetrics) {
	m.bound.Range(func(k, _ any) bool {
		rk := k.(RouteKey)
		if _, ok := keep[rk]; rk.Name != "" && !ok {
			m.bound.Delete(k)
			m.duration.DeleteLabelValues(rk.Namespace, rk.Name)
			m.requests.DeletePartialMatch(prometheus.Labels{"namespace": rk.Namespace, "route": rk.Name})
			m.upstream.DeletePartialMatch(prometheus.Labels{"namespace": rk.Namespace, "route": rk.Name})
		}
		return true
	})
}

func codeClass(code int) int {
	if c := code / 100; c >= 1 && c <= 5 {
		return c
	}
	return 0
}
