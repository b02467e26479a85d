package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addAgentServerFlags adds the `kube server` flags of the in-process node agent.
func addAgentServerFlags(f *pflag.FlagSet, o *server.AgentOptions) {}
