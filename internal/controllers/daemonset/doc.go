// Package daemonset is the DaemonSet controller: one pod per node that the pod template
// can run on (nodeSelector, node affinity, taints against the template's tolerations plus
// the automatic ones a daemon pod gets), placed by node affinity to that node and left to
// the scheduler; RollingUpdate with maxSurge/maxUnavailable and OnDelete over
// ControllerRevisions; status counts (desired, current, ready, available, misscheduled,
// updated); failed daemon pods re-created with backoff.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/daemon,
// kube-controller-manager's daemonset-controller) over the API with client-go informers
// and its own identity (system:kube-controller:daemonset-controller), on the holder of the
// kube-system/kube-daemonset-controller Lease.
package daemonset
