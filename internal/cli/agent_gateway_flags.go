package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/agent"
)

// addAgentGatewayFlags adds the flags of the agent's HTTP(S) gateway for Routes; prefix is
// "agent-" for kube server's in-process agent, "" for kube agent.
func addAgentGatewayFlags(f *pflag.FlagSet, prefix string, o *agent.GatewayOptions) {
	f.BoolVar(&o.Enabled, prefix+"gateway", true, "run the node's HTTP(S) gateway for Routes (kubeos.dev/v1alpha1)")
	f.StringVar(&o.Address, prefix+"gateway-address", "", "the gateway's listen address (default: all of the node's addresses)")
	f.IntVar(&o.HTTPPort, prefix+"gateway-http-port", 80, "the gateway's HTTP port (0: no HTTP)")
	f.IntVar(&o.HTTPSPort, prefix+"gateway-https-port", 443, "the gateway's HTTPS port, certificates chosen by SNI from the Routes' Certificates (0: no HTTPS)")
	f.IntVar(&o.MetricsPort, prefix+"gateway-metrics-port", 10254, "the port of the gateway's /metrics (kube_gateway_*; 0: not served)")
	f.BoolVar(&o.AccessLog, prefix+"gateway-access-log", true, "log one line per request through the gateway")
}
