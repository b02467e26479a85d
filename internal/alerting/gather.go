package alerting

import (
	"math"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
)

// FromFamilies flattens gathered metric families into series, as a Prometheus scrape of the
// text format would: counters, gauges and untyped metrics one series each; summaries
// name{quantile}, name_sum and name_count; histograms name_bucket{le} (with +Inf), name_sum
// and name_count.
func FromFamilies(mfs []*dto.MetricFamily) []Sample {
	var out []Sample
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			base := make([]labels.Label, 0, len(m.GetLabel())+2)
			for _, lp := range m.GetLabel() {
				base = append(base, labels.Label{Name: lp.GetName(), Value: lp.GetValue()})
			}
			add := func(n string, v float64, extra ...labels.Label) {
				ls := make([]labels.Label, 0, len(base)+1+len(extra))
				ls = append(ls, labels.Label{Name: labels.MetricName, Value: n})
				ls = append(ls, base...)
				ls = append(ls, extra...)
				out = append(out, Sample{Labels: labels.New(ls...), Value: v})
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, q.GetValue(), labels.Label{Name: "quantile", Value: formatFloat(q.GetQuantile())})
				}
				add(name+"_sum", s.GetSampleSum())
				add(name+"_count", float64(s.GetSampleCount()))
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					add(name+"_bucket", float64(b.GetCumulativeCount()), labels.Label{Name: "le", Value: formatFloat(b.GetUpperBound())})
				}
				if !inf {
					add(name+"_bucket", float64(h.GetSampleCount()), labels.Label{Name: "le", Value: "+Inf"})
				}
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount()))
			}
		}
	}
	return out
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
