package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"kubeos.dev/kube/internal/agent/stats"
)

// Stats is what the server needs of the node's measurements.
type Stats interface {
	Summary(ctx context.Context, cpuAndMemoryOnly bool) (*statsapi.Summary, error)
}

// statsRoutes are the kubelet's monitoring endpoints: /stats/summary (the statsapi
// Summary; only_cpu_and_memory=true for the cheap part), /metrics/resource (the resource
// metrics metrics-server scrapes), /metrics/cadvisor (cAdvisor-shaped container series)
// and /metrics (the agent's own, and the kubelet's kubelet_volume_stats_* of the claims its
// pods mount). Authorised as nodes/stats and nodes/metrics.
func (s *Server) statsRoutes(mux *http.ServeMux) {
	var metrics prometheus.Gatherers
	if s.opts.Metrics != nil {
		metrics = append(metrics, s.opts.Metrics)
	}
	if s.opts.Stats != nil {
		volumes := prometheus.NewRegistry()
		volumes.MustRegister(stats.NewVolumeCollector(s.opts.Stats.Summary))
		metrics = append(metrics, volumes)
	}
	if len(metrics) > 0 {
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	if s.opts.Stats == nil {
		return
	}
	mux.HandleFunc("GET /stats/summary", s.summary)
	resource := prometheus.NewRegistry()
	resource.MustRegister(stats.NewResourceCollector(s.opts.Stats.Summary))
	mux.Handle("GET /metrics/resource", promhttp.HandlerFor(resource, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	cadvisor := prometheus.NewRegistry()
	cadvisor.MustRegister(stats.NewCadvisorCollector(s.opts.Stats.Summary))
	mux.Handle("GET /metrics/cadvisor", promhttp.HandlerFor(cadvisor, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
}

func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	only := false
	if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, "only_cpu_and_memory: "+strconv.Quote(v)+" is not a boolean", http.StatusBadRequest)
			return
		}
		only = b
	}
	sum, err := s.opts.Stats.Summary(r.Context(), only)
	if err != nil {
		http.Error(w, "failed to get node summary: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sum)
}
