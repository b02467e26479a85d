package alerting

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// Store holds float samples per series in memory for a bounded retention and serves them to
// the PromQL engine (storage.Queryable). Samples older than the retention are dropped on
// append; a series left with no samples is dropped; MaxSeries bounds the number of series
// (new ones beyond it are refused and counted).
type Store struct {
	retention time.Duration
	maxSeries int

	mu     sync.RWMutex
	series map[uint64]*memSeries
	// byName indexes series by metric name: a selector names its metric, and a scan of one
	// name's series is what keeps 1,000 rules cheap.
	byName  map[string]map[uint64]*memSeries
	refused int
}

type memSeries struct {
	lset    labels.Labels
	samples []fsample // ascending by t
	stale   bool      // the last sample is a staleness marker
}

// fsample is a float sample (chunks.Sample).
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }

var _ storage.Queryable = (*Store)(nil)

// NewStore returns an empty store keeping samples for retention, at most maxSeries series
// (0: 100,000).
func NewStore(retention time.Duration, maxSeries int) *Store {
	if maxSeries <= 0 {
		maxSeries = 100000
	}
	return &Store{retention: retention, maxSeries: maxSeries, series: map[uint64]*memSeries{}, byName: map[string]map[uint64]*memSeries{}}
}

// Append adds one scrape at t: a sample per series in batch; a series absent from batch that
// had a live sample gets a staleness marker. Samples older than the retention go.
func (s *Store) Append(t time.Time, batch []Sample) {
	ts := t.UnixMilli()
	cut := t.Add(-s.retention).UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[uint64]bool, len(batch))
	for _, smp := range batch {
		h := smp.Labels.Hash()
		seen[h] = true
		ms := s.series[h]
		if ms == nil {
			if len(s.series) >= s.maxSeries {
				s.refused++
				continue
			}
			ms = &memSeries{lset: smp.Labels}
			s.series[h] = ms
			name := smp.Labels.Get(labels.MetricName)
			if s.byName[name] == nil {
				s.byName[name] = map[uint64]*memSeries{}
			}
			s.byName[name][h] = ms
		}
		ms.add(ts, smp.Value)
		ms.stale = false
	}
	for h, ms := range s.series {
		if !seen[h] && !ms.stale {
			ms.add(ts, math.Float64frombits(value.StaleNaN))
			ms.stale = true
		}
		i := sort.Search(len(ms.samples), func(i int) bool { return ms.samples[i].t >= cut })
		if i > 0 {
			ms.samples = slices.Delete(ms.samples, 0, i)
		}
		if len(ms.samples) == 0 {
			delete(s.series, h)
			name := ms.lset.Get(labels.MetricName)
			delete(s.byName[name], h)
			if len(s.byName[name]) == 0 {
				delete(s.byName, name)
			}
		}
	}
}

func (ms *memSeries) add(t int64, v float64) {
	if n := len(ms.samples); n > 0 && ms.samples[n-1].t >= t {
		return // out of order or duplicate: Prometheus refuses it too
	}
	ms.samples = append(ms.samples, fsample{t: t, f: v})
}

// Stats returns the number of series and samples held, and of series refused by MaxSeries.
func (s *Store) Stats() (series, samples, refused int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ms := range s.series {
		samples += len(ms.samples)
	}
	return len(s.series), samples, s.refused
}

// Querier implements storage.Queryable.
func (s *Store) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{s: s, mint: mint, maxt: maxt}, nil
}

type querier struct {
	s          *Store
	mint, maxt int64
}

func (q *querier) Select(_ context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	q.s.mu.RLock()
	var out []storage.Series
	for _, ser := range q.s.candidates(ms) {
		if !matches(ser.lset, ms) {
			continue
		}
		lo := sort.Search(len(ser.samples), func(i int) bool { return ser.samples[i].t >= mint })
		hi := sort.Search(len(ser.samples), func(i int) bool { return ser.samples[i].t > maxt })
		if lo >= hi {
			continue
		}
		smp := make(chunks.SampleSlice, 0, hi-lo)
		for _, x := range ser.samples[lo:hi] {
			smp = append(smp, x)
		}
		out = append(out, storage.NewListSeries(ser.lset, smp))
	}
	q.s.mu.RUnlock()
	if sortSeries {
		slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	}
	return &sliceSeriesSet{series: out, i: -1}
}

func (q *querier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	set := map[string]struct{}{}
	for _, ser := range q.s.series {
		if v := ser.lset.Get(name); v != "" && matches(ser.lset, ms) {
			set[v] = struct{}{}
		}
	}
	return sortedKeys(set), nil, nil
}

func (q *querier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	set := map[string]struct{}{}
	for _, ser := range q.s.series {
		if matches(ser.lset, ms) {
			ser.lset.Range(func(l labels.Label) { set[l.Name] = struct{}{} })
		}
	}
	return sortedKeys(set), nil, nil
}

func (q *querier) Close() error { return nil }

// candidates are the series a selector may match: those of its metric name when it names
// one (caller holds s.mu).
func (s *Store) candidates(ms []*labels.Matcher) map[uint64]*memSeries {
	for _, m := range ms {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return s.byName[m.Value]
		}
	}
	return s.series
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

type sliceSeriesSet struct {
	series []storage.Series
	i      int
}

func (s *sliceSeriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *sliceSeriesSet) At() storage.Series                { return s.series[s.i] }
func (s *sliceSeriesSet) Err() error                        { return nil }
func (s *sliceSeriesSet) Warnings() annotations.Annotations { return nil }
