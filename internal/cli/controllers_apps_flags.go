package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addWorkloadControllerFlags adds the flags of the workload controllers (internal/controllers/{deployment,replicaset,statefulset,daemonset,job,cronjob,…}).
func addWorkloadControllerFlags(f *pflag.FlagSet, o *server.WorkloadControllerOptions) {}
