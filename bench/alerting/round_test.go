package alerting

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kubeos.dev/kube/internal/alerting"
)

// kinds are the 17 platform kinds: the lifecycle metrics carry one label set per kind.
var kinds = []string{"Tenant", "Quota", "AccessPolicy", "SecretPolicy", "Credential", "Certificate", "Database", "Cache",
	"Topic", "Bucket", "Backup", "Alert", "Application", "Component", "Release", "Route", "Volume"}

var phases = []string{"Pending", "Reconciling", "Active", "Failed", "Deleting"}

// registry builds the lifecycle and event-bus metrics shaped as Kube registers them, plus
// filler series (the API server's request metrics) up to about series series.
func registry(series int) (*prometheus.Registry, func(step int)) {
	reg := prometheus.NewRegistry()
	phase := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_lifecycle_phase", Help: "h"}, []string{"kind", "phase"})
	trans := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_lifecycle_transitions_total", Help: "h"}, []string{"kind", "from", "to"})
	illegal := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_lifecycle_illegal_transitions_total", Help: "h"}, []string{"kind"})
	rec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kube_lifecycle_reconcile_seconds", Help: "h",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"kind"})
	events := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eventbus_events_total", Help: "h"}, []string{"type", "status"})
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_eventbus_backend_up", Help: "h"}, []string{"backend"})
	filler := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_request_total", Help: "h"}, []string{"resource", "verb", "code"})
	reg.MustRegister(phase, trans, illegal, rec, events, up, filler)
	n := 0
	for _, k := range kinds {
		for _, p := range phases {
			phase.WithLabelValues(k, p)
		}
	}
	fill := series - len(kinds)*(len(phases)+1+17+4) - 20
	for i := 0; n < fill; i++ {
		for _, v := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			filler.WithLabelValues(fmt.Sprintf("resource%d", i), v, "200")
			n++
		}
	}
	up.WithLabelValues("memory").Set(1)
	move := func(step int) {
		for i, k := range kinds {
			phase.WithLabelValues(k, "Active").Set(float64(100 + step%7 + i))
			trans.WithLabelValues(k, "Reconciling", "Active").Add(float64(step%3 + 1))
			rec.WithLabelValues(k).Observe(float64((step+i)%50) / 100)
			events.WithLabelValues("phase_changed", "published").Add(3)
			events.WithLabelValues(k+"_reconcile_failed", "published").Add(float64(step % 2))
		}
	}
	return reg, move
}

// rules returns n rules cycling through the shapes the default Alerts and users write.
func rules(n int) []alerting.Rule {
	shapes := []string{
		`kube_lifecycle_phase{kind="%s",phase="Failed"} > %d`,
		`increase(kube_lifecycle_illegal_transitions_total{kind="%s"}[5m]) > %d`,
		`rate(kube_lifecycle_transitions_total{kind="%s"}[5m]) > %d`,
		`histogram_quantile(0.99, sum by (le) (rate(kube_lifecycle_reconcile_seconds_bucket{kind="%s"}[5m]))) > %d`,
		`sum(rate(eventbus_events_total{type=~"(?i)%s_reconcile_failed"}[5m])) > %d`,
	}
	out := make([]alerting.Rule, n)
	for i := range out {
		expr := fmt.Sprintf(shapes[i%len(shapes)], kinds[(i/len(shapes))%len(kinds)], i%5)
		out[i] = alerting.Rule{Key: fmt.Sprintf("bench/r%d", i), Name: fmt.Sprintf("R%d", i), Expr: expr, For: time.Minute,
			Labels: map[string]string{"severity": "warning"}}
	}
	return out
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRound1000 is one sampling and evaluation round of 1,000 rules over a store that
// holds an hour of 15 s samples of about 2,000 series (Kube's /metrics is of that size).
func BenchmarkRound1000(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			reg, move := registry(2000)
			ev, err := alerting.New(alerting.Options{Gatherer: reg, Retention: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i := range 240 { // an hour of history before any rule
				move(i)
				ev.EvaluateOnce(ctx, t0.Add(time.Duration(i)*15*time.Second))
			}
			for _, r := range rules(n) {
				ev.Set(r)
			}
			series, samples, _ := ev.Store().Stats()
			step := 240
			c0 := cpu()
			b.ResetTimer()
			for b.Loop() {
				move(step)
				ev.EvaluateOnce(ctx, t0.Add(time.Duration(step)*15*time.Second))
				step++
			}
			b.StopTimer()
			b.ReportMetric(float64((cpu()-c0).Microseconds())/1000/float64(b.N), "cpu-ms/round")
			b.ReportMetric(float64(series), "series")
			b.ReportMetric(float64(samples), "samples")
			for _, r := range rules(n)[:min(n, 5)] {
				if st, _ := ev.Status(r.Key); st.LastError != "" {
					b.Fatalf("%s: %s", r.Expr, st.LastError)
				}
			}
		})
	}
}
