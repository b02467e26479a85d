// Package lifecycle is the pure core of Kube's lifecycle engine: the decisions every managed
// kind shares, as data in and data out, with no clients, goroutines or clocks of their own.
//
// Phases. Conditions are the stored truth — Ready, Reconciling, Stalled, DependenciesReady,
// Terminating, each a metav1.Condition with observedGeneration, reason and message.
// [DerivePhase] reads status.phase (Pending, Reconciling, Active, Failed, Deleting) off them.
// A kind's [TransitionTable] (default [DefaultTransitions]: Pending → Reconciling → Active,
// Active ↔ Reconciling, Failed → Reconciling, any → Failed, any → Deleting) guards the move:
// [TransitionTable.Check] refuses an illegal one with an [*IllegalTransitionError] naming it,
// [TransitionTable.Step] finds the next legal phase on the way (Failed → Reconciling on the
// way to Active), and [TransitionTable.CELRule] is the x-kubernetes-validations rule for the
// CRD's status.phase, so the API server refuses the same writes from any client.
//
// Dependencies. [Graph] holds "A depends on B" edges between objects ([Ref]: kind,
// namespace, name) and stays acyclic: an update that would close a cycle fails with a
// [*CycleError] carrying the path. Checks are incremental (Pearce–Kelly dynamic topological
// order), so they cost the size of the affected region, not of the graph.
// [Graph.TeardownOrder] gives the reverse order for deletion and [Graph.Holding] what keeps
// DependenciesReady False. Each edge has a [Link]: Requires (wait until Active; the
// dependency is torn down after), References (ordering only: wait only while it does not
// exist; a Release and its Component, which is Reconciling during the Release's rollout;
// the tooling draws it under its target), Contains (an aggregate and its members: wait
// until Active; the members are torn down first).
//
// Retries. [Immediate], [ExponentialBackoff] and [RateLimited] implement client-go's
// workqueue.TypedRateLimiter, so a controller-runtime controller can use them directly;
// [Policy] picks one per error class ([Classify]); [ThrashGuard] defers (never drops) an
// object reconciled too often.
//
// Status. [NextStatus] turns a reconcile's result (driver [Outcome], error, blockers,
// deletion) into the conditions to store and the phase to write, one legal step at a time.
//
// Kinds. A kind plugs in a [Driver] (Observe, Provision, Update, Deprovision, each returning
// an [Outcome]) and [KindOptions] (transition table, dependency extractors — Dependencies,
// References, Members — retry policy,
// concurrency, periodic requeue, timeouts). The controller-runtime pipeline that runs them
// (watch, filters, queue, workers, status writes with a resourceVersion precondition, events
// on pkg/eventbus) builds on these pieces.
//
// Tracing. Each reconcile has a trace id: the trace_id of every event it publishes, and, on
// a client whose rest.Config is wrapped with [TraceTransport], the [TraceHeader] of every
// API request it makes (Kube's audit log records it as lifecycle.kubeos.dev/trace-id).
package lifecycle
