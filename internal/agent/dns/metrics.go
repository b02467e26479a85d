package dns

import (
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are CoreDNS's request metrics under their names, so its dashboards and alerts
// work unchanged.
type Metrics struct {
	requests  *prometheus.CounterVec   // server, zone, proto, family, type
	responses *prometheus.CounterVec   // server, zone, rcode, plugin
	duration  *prometheus.HistogramVec // server, zone, type

	series sync.Map // obsKey -> *series: the label lookups done once per combination
}

type obsKey struct {
	server, zone, proto, family, qtype string
	rcode                              int
}

type series struct {
	requests, responses prometheus.Counter
	duration            prometheus.Observer
}

// observe counts one request answered with k's rcode after d.
func (m *Metrics) observe(k obsKey, d time.Duration) {
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &series{
			requests:  m.requests.WithLabelValues(k.server, k.zone, k.proto, k.family, k.qtype),
			responses: m.responses.WithLabelValues(k.server, k.zone, rcodeLabel(k.rcode), ""),
			duration:  m.duration.WithLabelValues(k.server, k.zone, k.qtype),
		})
	}
	s := v.(*series)
	s.requests.Inc()
	s.responses.Inc()
	s.duration.Observe(d.Seconds())
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "dns", Name: "requests_total",
			Help: "Counter of DNS requests made per zone, protocol and family."}, []string{"server", "zone", "proto", "family", "type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coredns", Subsystem: "dns", Name: "responses_total",
			Help: "Counter of response status codes."}, []string{"server", "zone", "rcode", "plugin"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "coredns", Subsystem: "dns", Name: "request_duration_seconds",
			Help:    "Histogram of the time (in seconds) each request took per zone.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16)}, []string{"server", "zone", "type"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.responses, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// typeLabel is CoreDNS's: the common types by name, the rest "other".
func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeTXT, dns.TypeSOA, dns.TypeNS,
		dns.TypeMX, dns.TypeANY, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeDS, dns.TypeDNSKEY:
		return dns.TypeToString[t]
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}
