// Package job is the Job controller: it runs a Job's pods to completion — completions and
// parallelism, NonIndexed and Indexed completion modes, backoffLimit and
// backoffLimitPerIndex, activeDeadlineSeconds, podFailurePolicy, successPolicy, suspend —
// tracking finished pods through the batch.kubernetes.io/job-tracking finalizer and
// status.uncountedTerminatedPods, so none is counted twice or lost across restarts, and
// sets the Complete/Failed (and SuccessCriteriaMet/FailureTarget) conditions that kubectl
// wait and Helm read.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/job,
// kube-controller-manager's job-controller) over the API with client-go informers and its
// own identity (system:kube-controller:job-controller), on the holder of the
// kube-system/kube-job-controller Lease.
package job
