// Package podgc is the pod garbage collector: it deletes pods bound to nodes that no longer
// exist (after a 40 s quarantine and a GET confirming the node is gone), pods that are
// terminating on out-of-service or unready-and-gone nodes, unscheduled pods that are being
// deleted, and — when more than TerminatedPodThreshold (12500) terminated pods exist — the
// oldest terminated ones beyond that number; pods are marked DisruptionTarget first, as
// upstream does. It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/podgc,
// kube-controller-manager's pod-garbage-collector-controller) over the API with client-go
// informers and its own identity, on the holder of the
// kube-system/kube-pod-garbage-collector Lease.
package podgc
