package agent

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"kubeos.dev/kube/internal/agent/proxy"
)

// ServicesOptions configure the Service proxy (the kube-proxy role, nftables); internal/agent/proxy does the work.
type ServicesOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default).
	Enabled bool
	// Table is the nftables table (family ip) the proxy owns (default "kube-proxy").
	Table string
	// NodeRoutes programs a route to every other node's pod CIDR via that node's
	// InternalIP (internal/agent/routes; needs Options.ClusterCIDR). Off in the zero value;
	// the flags turn it on by default.
	NodeRoutes bool
}

// proxies holds each running agent's proxy, for ServicesHandler.
var proxies sync.Map // *Agent → *proxy.Proxier

// services prepares the Service proxy (the kube-proxy role, nftables) when enabled and returns what runs it until ctx ends (nil when
// disabled). Without nftables it fails here, so the agent stops and says why.
func (a *Agent) services(ctx context.Context) (func(context.Context) error, error) {
	if !a.opts.Services.Enabled {
		return nil, nil
	}
	a.mu.Lock()
	cluster := a.opts.ClusterCIDR
	if cluster == "" {
		cluster = a.podCIDR
	}
	a.mu.Unlock()
	p, err := proxy.New(proxy.Options{
		Client: a.netClient(), NodeName: a.opts.NodeName, NodeIP: a.nodeIP, Table: a.opts.Services.Table,
		ServiceCIDR: a.opts.ServiceCIDR, ClusterCIDR: cluster, Log: a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: Service proxy: %w", err)
	}
	proxies.Store(a, p)
	return func(ctx context.Context) error {
		defer proxies.Delete(a)
		return p.Run(ctx)
	}, nil
}

// ServicesHandler serves the Service proxy's /debug/services (404 while it does not run);
// the agent's API mounts it.
func (a *Agent) ServicesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := proxies.Load(a)
		if !ok {
			http.Error(w, "the Service proxy is not running", http.StatusNotFound)
			return
		}
		p.(*proxy.Proxier).Handler().ServeHTTP(w, r)
	})
}
