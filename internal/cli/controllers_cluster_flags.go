package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addClusterControllerFlags adds the flags of the cluster controllers (internal/controllers/{endpointslice,nodelifecycle,nodeipam,resourcequota,…}).
func addClusterControllerFlags(f *pflag.FlagSet, o *server.ClusterControllerOptions) {}
