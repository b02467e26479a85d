package server

// WorkloadControllerOptions configure the workload controllers (internal/controllers/{deployment,replicaset,statefulset,daemonset,job,cronjob,…}).
type WorkloadControllerOptions struct{}

func (o *WorkloadControllerOptions) validate() error { return nil }

// workloadControllers are elected controllers of the workload controllers (internal/controllers/{deployment,replicaset,statefulset,daemonset,job,cronjob,…}); startElectedControllers runs them
// after electedControllers.
var workloadControllers []electedController
