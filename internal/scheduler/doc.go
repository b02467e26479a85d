// Package scheduler is Kube's scheduler: it places every unbound pod whose schedulerName
// is one of its profiles on a node, with upstream kube-scheduler's semantics, inside
// `kube server` under leader election (Lease kube-system/kube-scheduler).
//
// The plugins are upstream's: each profile is upstream's framework runtime
// (k8s.io/kubernetes/pkg/scheduler/framework/runtime) built from the in-tree registry and a
// KubeSchedulerConfiguration defaulted and validated by upstream's config packages
// ([DefaultConfig], [LoadConfigFile]: strict decoding, unknown plugins refused). So filters,
// scores, weights, preemption (DefaultPreemption) and binding (DefaultBinder, pods/binding)
// decide exactly as kube-scheduler v1.37 does.
//
// The shell around them is Kube's own:
//
//   - queue.go: activeQ (the profile's QueueSort: priority, then time), backoffQ (1 s
//     doubling to 10 s), the unschedulable pods, moved back when a cluster event one of the
//     plugins that rejected them registered for happens (their queueing hints consulted),
//     or after 5 minutes; scheduling gates through the PreEnqueue plugins. The queue is the
//     framework's PodNominator (nominator.go) and PodActivator.
//   - cache.go, snapshot.go, nodetree.go: nodes and the pods on them (bound or assumed) kept
//     from informers as upstream's NodeInfo; before each cycle only the nodes that changed
//     are copied into the snapshot plugins read (fwk.SharedLister), in upstream's
//     zone-interleaved order.
//   - cycle.go: one cycle pops a pod, runs PreFilter, tries its nominated node, filters in
//     parallel from where the last cycle stopped until upstream's adaptive
//     percentageOfNodesToScore of feasible nodes is found, scores, assumes the pod on the
//     best node, reserves and permits, and binds in a goroutine (retrying 429/5xx, a
//     conflict checked against the live pod). A pod that fits nowhere gets PostFilter
//     (preemption), PodScheduled=False with upstream's FitError message, a FailedScheduling
//     event (events.k8s.io, reportingController = the profile name) and goes back to the
//     queue. At most maxBindsInFlight binding cycles talk to the server at once.
//   - equiv.go, plugins.go: an equivalence cache — consecutive pods of one scheduling
//     signature reuse each node's verdict and raw scores of the plugins that read only the
//     pod and the node while the node's snapshot NodeInfo is unchanged; the other plugins
//     (PodTopologySpread, InterPodAffinity, ...) run every cycle beside them, in the
//     profile's order, on the plugin instances the registry built; decisions are the same as
//     without it (Options.NoEquivalenceCache turns it off).
//   - affinity.go: InterPodAffinity is upstream's plugin wrapped so that, for consecutive
//     pods of one signature with required (anti-)affinity, its PreFilter state is carried
//     over and brought up to date with the plugin's own AddPod/RemovePod for the nodes that
//     changed, instead of counted afresh over every pod of every node.
//   - metrics.go: kube-scheduler's scheduler_schedule_attempts_total,
//     scheduler_scheduling_attempt_duration_seconds, scheduler_pending_pods and
//     scheduler_pod_scheduling_sli_duration_seconds on the registerer given.
//
// Pods for other schedulers are never touched. A panic inside a cycle (a plugin meeting an
// odd object) fails that pod's attempt with an error and is logged; it never stops the
// scheduler or the server.
package scheduler
