package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/agent"
)

// addAgentDNSFlags adds the flags of the agent's node-local cluster DNS on the kube-dns Service's address; prefix is
// "agent-" for kube server's in-process agent, "" for kube agent.
func addAgentDNSFlags(f *pflag.FlagSet, prefix string, o *agent.DNSOptions) {
	f.BoolVar(&o.Enabled, prefix+"dns", true, "run the node's node-local cluster DNS on the kube-dns Service's address")
}
