package server

// ClusterControllerOptions configure the cluster controllers (internal/controllers/{endpointslice,nodelifecycle,nodeipam,resourcequota,…}).
type ClusterControllerOptions struct{}

func (o *ClusterControllerOptions) validate() error { return nil }

// clusterControllers are elected controllers of the cluster controllers (internal/controllers/{endpointslice,nodelifecycle,nodeipam,resourcequota,…}); startElectedControllers runs them
// after electedControllers.
var clusterControllers []electedController
