package proxy

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the proxy's, named as kube-proxy's where kube-proxy has one.
type metrics struct {
	reg            *prometheus.Registry
	syncDuration   prometheus.Histogram
	programming    prometheus.Histogram
	changeToKernel prometheus.Histogram
	lastSync       prometheus.Gauge
	syncErrors     prometheus.Counter
	servicePorts   prometheus.Gauge
	endpoints      prometheus.Gauge
	chains         prometheus.Gauge
}

func newMetrics() *metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms … 16 s
	m := &metrics{
		reg: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_sync_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds: one sync of the node's Service rules into nftables", Buckets: buckets}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_network_programming_duration_seconds",
			Help: "From an EndpointSlice's last-change-trigger-time to its rules in the kernel", Buckets: buckets}),
		changeToKernel: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_change_to_kernel_duration_seconds",
			Help: "From the informer's delivery of a Service or EndpointSlice change to its rules in the kernel", Buckets: buckets}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time the Service rules were synced"}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubeproxy_sync_proxy_rules_errors_total",
			Help: "Syncs whose nftables transaction failed"}),
		servicePorts: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeproxy_programmed_service_ports",
			Help: "Service ports programmed on this node"}),
		endpoints: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeproxy_programmed_endpoints",
			Help: "Endpoints programmed on this node (DNAT map elements and per-endpoint chains of affinity Services)"}),
		chains: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeproxy_sync_proxy_rules_nftables_chains",
			Help: "Per-service and per-endpoint chains in the table"}),
	}
	m.reg.MustRegister(m.syncDuration, m.programming, m.changeToKernel, m.lastSync, m.syncErrors, m.servicePorts, m.endpoints, m.chains)
	return m
}

func (m *metrics) observeSync(took time.Duration, d *desired, now time.Time) {
	m.syncDuration.Observe(took.Seconds())
	m.lastSync.Set(float64(now.UnixNano()) / 1e9)
	m.servicePorts.Set(float64(len(d.report)))
	eps := 0
	for name := range d.chains {
		if len(name) > 3 && name[:3] == "ep-" {
			eps++
		}
	}
	for _, targets := range d.dnatMaps {
		eps += len(targets)
	}
	m.endpoints.Set(float64(eps))
	m.chains.Set(float64(len(d.chains)))
}

// Registry holds the proxy's metrics (the agent may serve it or gather it into its own).
func (px *Proxier) Registry() *prometheus.Registry { return px.metrics.reg }

// MetricsHandler serves the proxy's metrics in the Prometheus text format.
func (px *Proxier) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(px.metrics.reg, promhttp.HandlerOpts{})
}

// debugState is /debug/services's document.
type debugState struct {
	Node           string                       `json:"node"`
	Table          string                       `json:"table"`
	ServiceCIDR    string                       `json:"serviceCIDR"`
	ClusterCIDR    string                       `json:"clusterCIDR,omitempty"`
	Synced         bool                         `json:"synced"`
	LastSync       *time.Time                   `json:"lastSync,omitempty"`
	LastError      string                       `json:"lastError,omitempty"`
	Syncs          int                          `json:"syncs"`
	Services       []portReport                 `json:"servicePorts"`
	EndpointSlices map[string]map[string]string `json:"endpointSlices"`
}

// State is what /debug/services shows: every programmed Service port with its endpoints
// and chain, and each Service's EndpointSlices by resourceVersion.
func (px *Proxier) state() debugState {
	px.mu.Lock()
	defer px.mu.Unlock()
	s := debugState{Node: px.o.NodeName, Table: px.o.Table, ServiceCIDR: px.p.serviceCIDR.String(), ClusterCIDR: px.o.ClusterCIDR,
		Synced: px.svcSynced && px.epsSynced && !px.lastSync.IsZero(), LastError: px.lastErr, Syncs: px.syncs,
		Services: append([]portReport(nil), px.report...), EndpointSlices: map[string]map[string]string{}}
	if !px.lastSync.IsZero() {
		t := px.lastSync
		s.LastSync = &t
	}
	for k, v := range px.sliceRVs {
		c := map[string]string{}
		for n, rv := range v {
			c[n] = rv
		}
		s.EndpointSlices[k] = c
	}
	sort.Slice(s.Services, func(i, j int) bool { return s.Services[i].Service < s.Services[j].Service })
	return s
}

// Handler serves /debug/services as JSON (mount it on the agent's API).
func (px *Proxier) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(px.state())
	})
}
