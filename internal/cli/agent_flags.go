package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addAgentServerFlags adds the `kube server` flags of the in-process node agent.
func addAgentServerFlags(f *pflag.FlagSet, o *server.AgentOptions) {
	f.BoolVar(&o.Agent, "agent", false, "run a node agent in this process (the single-machine setup): pods run through its own containerd")
	f.StringVar(&o.AgentNodeName, "agent-node-name", "", "the in-process agent's Node name (default: the hostname)")
	f.StringVar(&o.AgentDataDir, "agent-data-dir", "", "the in-process agent's data directory (default <data-dir>/agent)")
	f.IntVar(&o.AgentPort, "agent-port", 10250, "HTTPS port of the in-process agent's API")
	f.StringVar(&o.AgentPodCIDR, "agent-pod-cidr", "", "the in-process agent's pod CIDR when node IPAM gives its Node none")
	f.StringVar(&o.AgentBridge, "agent-bridge", "kube0", "the in-process agent's pod bridge name")
	f.StringVar(&o.AgentNodeIP, "agent-node-ip", "", "the in-process agent's Node InternalIP (default: the default-route interface's IPv4)")
	f.StringVar(&o.AgentContainerRuntimeEndpoint, "agent-container-runtime-endpoint", "", "an existing CRI endpoint for the in-process agent (default: its own containerd)")
	f.StringVar(&o.AgentContainerdProxy, "agent-containerd-proxy", "", "HTTP(S)_PROXY of the in-process agent's containerd")
	f.StringVar(&o.AgentImageDir, "agent-image-dir", "", "directory of image archives (*.tar) the in-process agent imports at start")
	f.StringVar(&o.AgentEvictionHard, "agent-eviction-hard", server.InProcessEvictionHard, "the in-process agent's hard eviction thresholds (kube agent's --eviction-hard syntax; memory only by default: it shares its disk with etcd; \"none\": no threshold)")
	f.StringVar(&o.AgentCgroupRoot, "agent-cgroup-root", "/", "parent cgroup of the in-process agent's kubepods hierarchy")
	f.StringSliceVar(&o.AgentClusterDNS, "agent-cluster-dns", nil, "cluster DNS servers for the in-process agent's ClusterFirst pods")
	f.StringVar(&o.AgentResolvConf, "agent-resolv-conf", "/etc/resolv.conf", "resolv.conf of the in-process agent's dnsPolicy Default pods")
	addAgentServicesFlags(f, "agent-", &o.AgentServices)
	addAgentDNSFlags(f, "agent-", &o.AgentDNS)
	addAgentNetworkPolicyFlags(f, "agent-", &o.AgentNetworkPolicy)
	addAgentGatewayFlags(f, "agent-", &o.AgentGateway)
}
