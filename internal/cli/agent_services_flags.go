package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/agent"
)

// addAgentServicesFlags adds the flags of the agent's Service proxy (ClusterIP, NodePort and externalIPs programmed in nftables); prefix is
// "agent-" for kube server's in-process agent, "" for kube agent.
func addAgentServicesFlags(f *pflag.FlagSet, prefix string, o *agent.ServicesOptions) {
	f.BoolVar(&o.Enabled, prefix+"services", true, "run the node's Service proxy (ClusterIP, NodePort and externalIPs programmed in nftables)")
	f.StringVar(&o.Table, prefix+"services-table", "kube-proxy", "the nftables table (family ip) the Service proxy owns; removed by --cleanup")
	f.BoolVar(&o.NodeRoutes, prefix+"node-routes", true, "route every other node's pod CIDR via its InternalIP (needs the cluster CIDR; removed by --cleanup)")
}
