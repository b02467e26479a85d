package agent

import (
	"context"
	"fmt"

	"kubeos.dev/kube/internal/agent/netpol"
)

// NetworkPolicyOptions configure NetworkPolicy enforcement (nftables); internal/agent/netpol does the work.
type NetworkPolicyOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default).
	Enabled bool
	// Table is the node's nftables table (family ip) holding the rules (default
	// kube-netpol; tests give each package its own).
	Table string
}

// networkPolicy prepares NetworkPolicy enforcement (nftables) when enabled and returns what runs it until ctx ends (nil when
// disabled). A node without nftables or br_netfilter fails here, at start: unlike the
// Service proxy (which leaves the node up with ServiceProxyReady False), policies that
// cannot be enforced would leave every pod on the node open, so the agent runs no pods
// unless its operator turns enforcement off (--network-policy=false) knowingly — as a
// CNI that cannot program a pod's network fails the pod rather than running it unfiltered.
func (a *Agent) networkPolicy(ctx context.Context) (func(context.Context) error, error) {
	if !a.opts.NetworkPolicy.Enabled {
		return nil, nil
	}
	c := netpol.New(netpol.Options{Client: a.netClient(), NodeName: a.opts.NodeName, Table: a.opts.NetworkPolicy.Table, Log: a.log})
	if err := c.Prepare(); err != nil {
		return nil, fmt.Errorf("agent: NetworkPolicy cannot be enforced on this node, so it runs no pods (start it with "+
			"--network-policy=false to run pods without NetworkPolicy enforcement; Services then report ServiceProxyReady=False "+
			"while nftables is missing): %w", err)
	}
	return c.Run, nil
}
