package agent

import (
	"context"
	"fmt"

	"kubeos.dev/kube/internal/agent/routes"
)

// nodeRoutes prepares the routes to the other nodes' pod CIDRs (internal/agent/routes)
// when Services.NodeRoutes is on and returns what runs it until ctx ends (nil when off).
// Without a cluster CIDR the agent does not know which routes are its cluster's, so it
// programs none and says so.
func (a *Agent) nodeRoutes(ctx context.Context) (func(context.Context) error, error) {
	if !a.opts.Services.NodeRoutes {
		return nil, nil
	}
	if a.opts.ClusterCIDR == "" {
		a.log.Warn("no cluster CIDR (--cluster-cidr): routes to other nodes' pod CIDRs are not programmed")
		return nil, nil
	}
	c, err := routes.New(routes.Options{Client: a.netClient(), NodeName: a.opts.NodeName, ClusterCIDR: a.opts.ClusterCIDR, Log: a.log})
	if err != nil {
		return nil, fmt.Errorf("agent: node routes: %w", err)
	}
	return c.Run, nil
}
