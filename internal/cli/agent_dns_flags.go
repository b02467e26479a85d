package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/server"
)

// addAgentDNSFlags adds the flags of the agent's node-local cluster DNS on the kube-dns Service's address; prefix is
// "agent-" for kube server's in-process agent, "" for kube agent.
func addAgentDNSFlags(f *pflag.FlagSet, prefix string, o *agent.DNSOptions) {
	f.BoolVar(&o.Enabled, prefix+"dns", true, "run the node's node-local cluster DNS on the kube-dns Service's address")
	f.StringVar(&o.Interface, prefix+"dns-interface", agent.DefaultDNSInterface, "interface that holds the cluster DNS address on the node (created: a dummy link, else an empty bridge)")
	f.StringVar(&o.Address, prefix+"dns-address", "", "address the node-local DNS answers on (default: the kube-system/kube-dns Service's ClusterIP)")
	f.IntVar(&o.Port, prefix+"dns-port", 53, "node-local DNS port (UDP and TCP)")
	f.IntVar(&o.MetricsPort, prefix+"dns-metrics-port", 9153, "port of the node-local DNS's /metrics on its address (-1: none)")
}

// addClusterDNSFlags adds kube server's flags for the cluster DNS Service
// (kube-system/kube-dns).
func addClusterDNSFlags(f *pflag.FlagSet, o *server.ClusterDNSOptions) {
	f.StringVar(&o.ClusterDNS, "cluster-dns", "", "ClusterIP of the kube-system/kube-dns Service the node agents answer DNS on (default: the tenth address of --service-cluster-ip-range)")
	f.BoolVar(&o.DisableClusterDNSService, "disable-cluster-dns-service", false, "do not create the kube-system/kube-dns Service")
}
