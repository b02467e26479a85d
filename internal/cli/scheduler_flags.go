package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addSchedulerFlags adds the flags of the in-process scheduler (internal/scheduler).
func addSchedulerFlags(f *pflag.FlagSet, o *server.SchedulerOptions) {}
