// Command oracle runs the same controller scenarios against Kube (`kube server`) and against
// upstream kube-apiserver + kube-controller-manager + kube-scheduler v1.37.2, and compares what
// a client sees: the objects at each checkpoint of a scenario (names, ownerReferences,
// annotations, spec as defaulted, status fields, condition reasons), the path to them (the
// order of pod creations and deletions, each ReplicaSet's scale steps, each object's
// condition-reason sequence), the events' reasons and messages, and the answers to the
// requests a scenario makes (an eviction refused by a budget, a create refused by a quota).
//
// Both sides get the same node model: `kube sim` (internal/simnode) runs three simulated nodes
// against each API server from one stage table (stages.yaml, embedded), so a pod's kubelet
// statuses are the same on both sides; Kube schedules with its own scheduler and the peer with
// kube-scheduler. Each scenario runs in a namespace of its own, on both sides at once.
//
// What legitimately differs is normalised away before comparing (normalize.go): uids,
// resourceVersions, managedFields, timestamps, IP addresses, random name suffixes where upstream
// itself randomises (generateName: pods of a ReplicaSet, Job or DaemonSet, EndpointSlices; a
// CronJob's Jobs, named by the minute they were scheduled), and the node a scheduler chose for
// a pod that could go to any node. What remains differs for a reason; a difference that is
// known and explained is on the allow-list (allow.go) with its reason; any other difference
// makes the command exit 1.
//
// Usage:
//
//	go build -o /tmp/oracle/kube ./cmd/kube
//	go run ./bench/oracle -peer-bin /work/peers-bin -kube /tmp/oracle/kube [-scenarios deployment,job] [-keep]
package main
