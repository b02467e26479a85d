// Package simnode runs simulated nodes: Nodes whose kubelet is a model in memory, as
// kwok's, so that schedulers, controllers and workloads can be exercised at thousands of
// nodes and a hundred thousand pods on one machine, and users can try workloads without
// containers. `kube server --sim-nodes N` runs a Simulator as an elected controller
// (Lease kube-system/kube-sim-nodes); `kube sim --kubeconfig … --nodes N` runs one
// against any server, as its own process.
//
// What a simulated node does, as a kubelet would, and only through the API:
//
//   - registers its Node (<prefix><i>; labels kubernetes.io/hostname, kubernetes.io/os,
//     kubernetes.io/arch, topology.kubernetes.io/zone spread over the zones, and the
//     simulated markers TypeLabel=TypeValue and NodeAnnotation; capacity and allocatable,
//     conditions, addresses, nodeInfo), then writes its whole status;
//   - renews its Lease in kube-node-lease every LeaseRenewInterval (10 s) and reports its
//     status every StatusReport (5 min, the kubelet's nodeStatusReportFrequency; nothing
//     about a simulated node changes in between);
//   - moves every pod bound to it through the pod status a kubelet writes, as the stage
//     table says (Stage, DefaultStages): the sandbox (pod IP from spec.podCIDR, or the
//     simulator's own /24 per node, PodReadyToStartContainers), containers running and
//     ready (Initialized, ContainersReady, Ready, in the kubelet's order), Succeeded after
//     a run time for restartPolicy Never/OnFailure, CrashLoopBackOff with the kubelet's
//     back-off, a Ready=False that another writer put on a running ready pod (the node
//     lifecycle controller, after a late Lease) written back to True after 10 s (the
//     kubelet's status sync), and on deletion its containers terminated and then the final
//     DELETE with grace 0 and a UID precondition;
//   - stops all of that while its Node carries HeartbeatAnnotation=stopped (its Lease
//     expires, as a machine's that lost power).
//
// Every write acts as the node: the simulator's one HTTP client impersonates
// system:node:<name> in group system:nodes per request (the node named by the request's
// context), so the Node authorizer and NodeRestriction admission judge it as they judge a
// kubelet; the simulator's own identity must be allowed to impersonate, and it lists and
// watches pods and Nodes. One client, one connection, instead of a client certificate and
// a TLS connection per node.
//
// Cost is kept small: one watch of all bound pods (a field selector cannot OR node
// names) whose objects are not cached — each event is reduced to a podView of a few
// hundred bytes with the fields the stages and the status need (pods of one template
// share their shape); one heap of due tasks (a pod's next transition, each node's Lease
// renewal and status report: no goroutine or timer per node or pod) drained by one loop
// into a bounded pool of workers behind a token bucket; zero-delay stages coalesce into one
// status patch. A write's response is taken in at once, so the next stage does not wait
// for the watch, and watch events older than it are ignored. Requests and answers are
// JSON: Kube's server keeps objects as JSON and answers protobuf only by converting each
// object (a watch event per watcher) — a protobuf client would cost it more, not less.
package simnode
