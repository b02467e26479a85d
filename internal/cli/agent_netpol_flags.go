package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/netpol"
)

// addAgentNetworkPolicyFlags adds the flags of the agent's NetworkPolicy enforcement (nftables); prefix is
// "agent-" for kube server's in-process agent, "" for kube agent.
func addAgentNetworkPolicyFlags(f *pflag.FlagSet, prefix string, o *agent.NetworkPolicyOptions) {
	f.BoolVar(&o.Enabled, prefix+"network-policy", true, "run the node's NetworkPolicy enforcement (nftables)")
	f.StringVar(&o.Table, prefix+"network-policy-table", netpol.DefaultTable, "the nftables table (family ip) holding the node's NetworkPolicy rules")
}
