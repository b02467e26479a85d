// Package nodelifecycle is the node lifecycle controller: every NodeMonitorPeriod it checks
// each Node's heartbeats (its kube-node-lease Lease renewTime and its status); a node silent
// for NodeMonitorGracePeriod (50 s) gets Ready=Unknown with reason NodeStatusUnknown and
// "Kubelet stopped posting node status.", the node.kubernetes.io/unreachable (or not-ready)
// NoExecute taint — added through per-zone rate limiters that slow down or stop when a zone
// or the whole cluster looks disrupted — and the matching NoSchedule taint, and its pods go
// Ready=False. When the node heartbeats again the taints are removed. Deleting the tainted
// pods after their tolerationSeconds is the separate taint-eviction controller's job
// (package tainteviction). It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/nodelifecycle, kube-controller-manager's
// node-lifecycle-controller) over the API with client-go informers and its own identity, on
// the holder of the kube-system/kube-node-lifecycle-controller Lease.
package nodelifecycle
