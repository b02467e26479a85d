package agent

import (
	"context"
	"sync"
)

// startNetworking starts the node's Service networking beside the pod manager (issue 19):
// the routes to the other nodes' pod CIDRs (internal/agent/routes), the Service proxy
// (internal/agent/proxy), the node-local cluster DNS (internal/agent/dns) and NetworkPolicy
// enforcement (internal/agent/netpol), each when its options enable it. They act as the
// node's networking identity (net_identity.go), obtained first in the background, so the
// pods run meanwhile. A component that fails sends its error to errc, which stops the
// agent; each stops when ctx ends, and wg tracks it.
func (a *Agent) startNetworking(ctx context.Context, wg *sync.WaitGroup, errc chan<- error) {
	o := a.opts
	if !o.Services.Enabled && !o.Services.NodeRoutes && !o.DNS.Enabled && !o.NetworkPolicy.Enabled {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		client, err := a.networkingClient(ctx)
		if err != nil {
			if ctx.Err() == nil {
				errc <- err
			}
			return
		}
		netClients.Store(a, client)
		defer netClients.Delete(a)
		var runs sync.WaitGroup
		defer runs.Wait()
		for _, start := range []func(context.Context) (func(context.Context) error, error){a.nodeRoutes, a.services, a.clusterDNS, a.networkPolicy} {
			run, err := start(ctx)
			if err != nil {
				errc <- err
				return
			}
			if run == nil {
				continue
			}
			runs.Add(1)
			go func() {
				defer runs.Done()
				if err := run(ctx); err != nil && ctx.Err() == nil {
					errc <- err
				}
			}()
		}
	}()
}
