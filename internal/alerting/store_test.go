package alerting

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

func TestStoreRetentionAndStaleness(t *testing.T) {
	st := NewStore(time.Minute, 2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := Sample{Labels: labels.FromStrings("__name__", "x", "i", "a"), Value: 1}
	b := Sample{Labels: labels.FromStrings("__name__", "x", "i", "b"), Value: 2}
	c := Sample{Labels: labels.FromStrings("__name__", "x", "i", "c"), Value: 3}
	st.Append(t0, []Sample{a, b, c})
	if s, n, refused := st.Stats(); s != 2 || n != 2 || refused != 1 {
		t.Fatalf("stats %d series %d samples %d refused", s, n, refused)
	}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1000, Timeout: time.Second, LookbackDelta: 5 * time.Minute})
	lq := localQuerier{engine: eng, q: st}
	count := func(ts time.Time) int {
		t.Helper()
		res, err := lq.Query(context.Background(), `x`, ts)
		if err != nil {
			t.Fatal(err)
		}
		return len(res)
	}
	if n := count(t0); n != 2 {
		t.Fatalf("at t0: %d series", n)
	}
	st.Append(t0.Add(15*time.Second), []Sample{a}) // b vanished: stale
	if n := count(t0.Add(15 * time.Second)); n != 1 {
		t.Fatalf("after b vanished: %d series, want 1 (staleness marker)", n)
	}
	st.Append(t0.Add(2*time.Minute), []Sample{a}) // beyond retention: old samples go, b is dropped
	if s, n, _ := st.Stats(); s != 1 || n != 1 {
		t.Fatalf("after retention: %d series %d samples", s, n)
	}
}

func TestFromFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"k"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h", Buckets: []float64{0.5, 1}})
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "s", Help: "h", Objectives: map[float64]float64{0.5: 0.05}})
	reg.MustRegister(c, h, s)
	c.WithLabelValues("v").Add(3)
	h.Observe(0.7)
	s.Observe(2)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, smp := range FromFamilies(mfs) {
		got[smp.Labels.String()] = smp.Value
	}
	want := map[string]float64{
		`{__name__="c_total", k="v"}`:             3,
		`{__name__="h_seconds_bucket", le="0.5"}`: 0, `{__name__="h_seconds_bucket", le="1"}`: 1, `{__name__="h_seconds_bucket", le="+Inf"}`: 1,
		`{__name__="h_seconds_sum"}`: 0.7, `{__name__="h_seconds_count"}`: 1,
		`{__name__="s", quantile="0.5"}`: 2, `{__name__="s_sum"}`: 2, `{__name__="s_count"}`: 1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d series: %v", len(got), got)
	}
}
