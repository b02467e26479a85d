package alerting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"kubeos.dev/kube/pkg/eventbus"
)

// Topic is the event-bus topic of alert notifications; the event types are EventFiring and
// EventResolved.
const (
	Topic         = "alerts"
	EventFiring   = "alert_firing"
	EventResolved = "alert_resolved"
)

// Options configure an Evaluator. Zero values take the defaults in complete.
type Options struct {
	// Gatherer is sampled every Interval for rules without a Prometheus (nil: no local
	// samples; such rules evaluate over an empty store).
	Gatherer prometheus.Gatherer
	// Interval is the sampling and evaluation interval (default 15s).
	Interval time.Duration
	// Retention bounds how long samples are kept (default 1h); MaxSeries the number of
	// series (default 100,000).
	Retention time.Duration
	MaxSeries int
	// QueryTimeout bounds one rule's query (default 10s); Concurrency is how many rules are
	// evaluated at once (default 4).
	QueryTimeout time.Duration
	Concurrency  int
	// ResendDelay is how often firing alerts are re-sent to receivers that want it
	// (Alertmanager; default 1m).
	ResendDelay time.Duration
	// LookbackDelta is PromQL's staleness window (default 5m).
	LookbackDelta time.Duration
	// Bus receives alert_firing and alert_resolved events on Topic (nil: none).
	Bus eventbus.Publisher
	// HTTPClient talks to Prometheus servers (default http.DefaultClient).
	HTTPClient *http.Client
	// Registerer receives the kube_alerting_* metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Now is the clock of Start (default time.Now); Log the logger (default discard).
	Now func() time.Time
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.Interval <= 0 {
		o.Interval = 15 * time.Second
	}
	if o.Retention <= 0 {
		o.Retention = time.Hour
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 10 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.ResendDelay <= 0 {
		o.ResendDelay = time.Minute
	}
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// RuleStatus is a rule's state after its last evaluation.
type RuleStatus struct {
	Summary
	// LastEvaluation is when the rule was last evaluated (zero: not yet).
	LastEvaluation time.Time
	// LastError is the last evaluation's error or, failing that, the last notification's.
	LastError string
	// Alerts are the rule's alerts (pending, firing, recently resolved), by labels.
	Alerts []Alert
}

// Evaluator evaluates rules every interval and notifies their receivers.
type Evaluator struct {
	opts  Options
	store *Store
	local localQuerier
	m     *metrics

	round sync.Mutex // one evaluation round at a time

	mu      sync.Mutex
	rules   map[string]*ruleState
	remotes map[string]remoteQuerier
}

type ruleState struct {
	rule      Rule
	alerts    map[uint64]Alert
	lastEval  time.Time
	evalErr   error
	notifyErr error
	summary   Summary
	lastSent  time.Time
}

// New returns an evaluator with no rules; it runs once Start is called.
func New(opts Options) (*Evaluator, error) {
	opts.complete()
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("alerting: metrics: %w", err)
	}
	st := NewStore(opts.Retention, opts.MaxSeries)
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: opts.QueryTimeout, LookbackDelta: opts.LookbackDelta,
		Logger: opts.Log})
	return &Evaluator{opts: opts, store: st, local: localQuerier{engine: eng, q: st}, m: m,
		rules: map[string]*ruleState{}, remotes: map[string]remoteQuerier{}}, nil
}

// Store is the evaluator's sample store.
func (e *Evaluator) Store() *Store { return e.store }

// Interval is the evaluation interval.
func (e *Evaluator) Interval() time.Duration { return e.opts.Interval }

// Set adds or replaces a rule. A rule whose expression, name, labels and source are
// unchanged keeps its alerts (a changed for or receivers apply from the next round).
func (e *Evaluator) Set(r Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.rules[r.Key]; ok {
		same := cur.rule.Expr == r.Expr && cur.rule.Name == r.Name && cur.rule.Prometheus == r.Prometheus && maps.Equal(cur.rule.Labels, r.Labels)
		cur.rule = r
		if !same {
			cur.alerts, cur.summary, cur.evalErr, cur.lastEval = map[uint64]Alert{}, Summary{State: StateInactive}, nil, time.Time{}
		}
		return
	}
	e.rules[r.Key] = &ruleState{rule: r, alerts: map[uint64]Alert{}, summary: Summary{State: StateInactive}}
	e.m.rules.Set(float64(len(e.rules)))
}

// Remove drops a rule; its firing alerts are not resolved at receivers (Alertmanager lets
// them expire).
func (e *Evaluator) Remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.rules, key)
	e.m.rules.Set(float64(len(e.rules)))
}

// Keys lists the rules' keys, sorted.
func (e *Evaluator) Keys() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.rules))
}

// Status returns a rule's state; false if the rule is unknown.
func (e *Evaluator) Status(key string) (RuleStatus, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs, ok := e.rules[key]
	if !ok {
		return RuleStatus{}, false
	}
	st := RuleStatus{Summary: rs.summary, LastEvaluation: rs.lastEval}
	switch {
	case rs.evalErr != nil:
		st.LastError = rs.evalErr.Error()
	case rs.notifyErr != nil:
		st.LastError = rs.notifyErr.Error()
	}
	for _, h := range slices.Sorted(maps.Keys(rs.alerts)) {
		st.Alerts = append(st.Alerts, rs.alerts[h])
	}
	slices.SortFunc(st.Alerts, func(a, b Alert) int { return labels.Compare(a.Labels, b.Labels) })
	return st, true
}

// Start samples and evaluates every interval until ctx ends; the first round runs at once.
func (e *Evaluator) Start(ctx context.Context) error {
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	for {
		e.EvaluateOnce(ctx, e.opts.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// EvaluateOnce samples the gatherer at now and evaluates every rule at now.
func (e *Evaluator) EvaluateOnce(ctx context.Context, now time.Time) {
	e.round.Lock()
	defer e.round.Unlock()
	start := time.Now()
	defer func() { e.m.round.Observe(time.Since(start).Seconds()) }()
	if g := e.opts.Gatherer; g != nil {
		mfs, err := g.Gather()
		if err != nil {
			e.opts.Log.Debug("alerting: gather", "err", err) // partial results are still samples
		}
		e.store.Append(now, FromFamilies(mfs))
	}
	e.mu.Lock()
	keys := slices.Sorted(maps.Keys(e.rules))
	e.mu.Unlock()
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(e.opts.Concurrency, max(len(keys), 1)) {
		wg.Go(func() {
			for k := range work {
				e.evaluate(ctx, k, now)
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
}

// evaluate runs one rule at now, steps its state, and notifies.
func (e *Evaluator) evaluate(ctx context.Context, key string, now time.Time) {
	e.mu.Lock()
	rs, ok := e.rules[key]
	if !ok {
		e.mu.Unlock()
		return
	}
	r := rs.rule
	e.mu.Unlock()

	q, err := e.querier(r)
	var res []Sample
	if err == nil {
		qctx, cancel := context.WithTimeout(ctx, e.opts.QueryTimeout)
		res, err = q.Query(qctx, r.Expr, now)
		cancel()
	}
	if err != nil {
		e.m.evaluations.WithLabelValues("error").Inc()
		e.mu.Lock()
		if cur, ok := e.rules[key]; ok && cur == rs {
			rs.evalErr, rs.lastEval = err, now
		}
		e.mu.Unlock()
		return // Prometheus keeps the alerts as they were when a query fails
	}
	e.m.evaluations.WithLabelValues("ok").Inc()

	e.mu.Lock()
	if cur, ok := e.rules[key]; !ok || cur != rs || rs.rule.Expr != r.Expr {
		e.mu.Unlock()
		return // removed or replaced meanwhile
	}
	next, tr := Step(rs.alerts, StepInput{Name: r.Name, For: r.For, KeepFiringFor: r.KeepFiringFor, Labels: r.Labels,
		Annotations: r.Annotations, Results: res, Now: now})
	rs.alerts, rs.summary, rs.lastEval, rs.evalErr = next, Summarize(next), now, nil
	n, changed, resend := e.pending(rs, tr, now)
	if changed || resend {
		rs.lastSent = now
	}
	e.mu.Unlock()

	for _, t := range tr {
		if !t.Notifies() {
			continue
		}
		typ := EventFiring
		if t.To == StateInactive {
			typ = EventResolved
		}
		e.publish(ctx, eventbus.Event{Type: typ, Kind: "Alert", Namespace: r.Namespace, Name: r.Name, UID: r.UID,
			From: string(t.From), To: string(t.To), Reason: t.Alert.Labels.String()})
	}
	if !changed && !resend {
		return
	}
	var errs []error
	for _, recv := range r.Receivers {
		if !changed && !recv.WantsResend() {
			continue
		}
		if err := recv.Notify(ctx, n); err != nil {
			e.m.notifications.WithLabelValues(recv.Type(), "error").Inc()
			e.opts.Log.Warn("alert notification failed", "rule", key, "receiver", recv.Name(), "err", err)
			errs = append(errs, fmt.Errorf("notify %s: %w", recv.Name(), err))
			continue
		}
		e.m.notifications.WithLabelValues(recv.Type(), "ok").Inc()
	}
	e.mu.Lock()
	if cur, ok := e.rules[key]; ok && cur == rs {
		rs.notifyErr = errors.Join(errs...)
	}
	e.mu.Unlock()
}

// pending decides what to send after a step (caller holds e.mu): changed when an alert
// started firing or resolved; resend when alerts fire and ResendDelay has passed.
func (e *Evaluator) pending(rs *ruleState, tr []Transition, now time.Time) (Notification, bool, bool) {
	changed := slices.ContainsFunc(tr, Transition.Notifies)
	resolvedNow := map[uint64]bool{}
	for _, t := range tr {
		if t.From == StateFiring && t.To == StateInactive {
			resolvedNow[t.Alert.Labels.Hash()] = true
		}
	}
	n := Notification{Rule: &rs.rule, Now: now, Resend: !changed,
		EndsAt: now.Add(4 * max(e.opts.Interval, e.opts.ResendDelay))}
	for _, h := range slices.Sorted(maps.Keys(rs.alerts)) {
		a := rs.alerts[h]
		if a.State == StateFiring || resolvedNow[h] {
			n.Alerts = append(n.Alerts, a)
		}
	}
	slices.SortFunc(n.Alerts, func(a, b Alert) int { return labels.Compare(a.Labels, b.Labels) })
	resend := !changed && rs.summary.State == StateFiring && now.Sub(rs.lastSent) >= e.opts.ResendDelay
	return n, changed, resend
}

func (e *Evaluator) querier(r Rule) (instantQuerier, error) {
	if r.Prometheus == "" {
		return e.local, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if q, ok := e.remotes[r.Prometheus]; ok {
		return q, nil
	}
	q, err := newRemote(r.Prometheus, e.opts.HTTPClient)
	if err != nil {
		return nil, err
	}
	e.remotes[r.Prometheus] = q
	return q, nil
}

func (e *Evaluator) publish(ctx context.Context, ev eventbus.Event) {
	if e.opts.Bus == nil {
		return
	}
	if err := e.opts.Bus.Publish(ctx, Topic, ev); err != nil && !errors.Is(err, context.Canceled) {
		e.opts.Log.Debug("alerting: event bus publish", "type", ev.Type, "err", err)
	}
}
