// Package alerting evaluates Prometheus-style alerting rules and sends their notifications.
//
// A [Rule] is what an Alert object declares: a PromQL expression, a hold duration (for),
// keepFiringFor, labels, annotations and receivers. The [Evaluator] evaluates every rule once
// per interval (default 15 s) with the upstream PromQL engine
// (github.com/prometheus/prometheus/promql), over one of two sources:
//
//   - Kube's own metrics: the evaluator gathers a prometheus.Gatherer each interval into a
//     [Store], an in-memory ring of samples per series bounded by a retention (default 1 h:
//     a few rule windows), which implements storage.Queryable for the engine. A series that
//     disappears from a gather gets a staleness marker, as a Prometheus scrape does.
//   - A Prometheus server, through its HTTP query API (github.com/prometheus/client_golang/api),
//     when the rule names one (Rule.Prometheus).
//
// The result of each evaluation goes through [Step], a pure function that applies
// Prometheus's rule state machine to every series of the result: inactive → pending (the
// expression returns the series) → firing once it has been returned for the rule's `for`;
// a firing alert whose series vanishes stays firing for keepFiringFor, then resolves; a
// pending one that vanishes is dropped. Step returns the transitions, and the evaluator
// notifies each rule's receivers of the alerts that started firing or resolved:
// [Webhook] receivers get Alertmanager's webhook payload (version 4), an [Alertmanager]
// receiver gets POST /api/v2/alerts (re-sent while firing, so its endsAt never lapses), and
// the evaluator's bus gets alert_firing / alert_resolved events on topic [Topic].
//
// Start runs the loop until its context ends; EvaluateOnce runs one round at a given time
// (tests, benchmarks). Set, Remove and Status are safe to call at any time.
//
//	ev := alerting.New(alerting.Options{Gatherer: reg, Bus: bus})
//	ev.Set(alerting.Rule{Key: "ns/name", Name: "HighErrors", Expr: `rate(errors_total[5m]) > 1`, For: time.Minute,
//		Receivers: []alerting.Notifier{&alerting.Webhook{URL: "http://hooks.example/alert"}}})
//	go ev.Start(ctx)
//	st, _ := ev.Status("ns/name") // state, activeSince, lastEvaluation, lastError, value
package alerting
