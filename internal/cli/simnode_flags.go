package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addSimNodeFlags adds the flags of simulated nodes (internal/simnode).
func addSimNodeFlags(f *pflag.FlagSet, o *server.SimNodeOptions) {}
