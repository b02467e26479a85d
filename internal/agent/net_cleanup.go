package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"kubeos.dev/kube/internal/agent/cni"
	agentdns "kubeos.dev/kube/internal/agent/dns"
	"kubeos.dev/kube/internal/agent/netpol"
	"kubeos.dev/kube/internal/agent/proxy"
	"kubeos.dev/kube/internal/agent/routes"
)

// CleanupNetworking removes, from the calling process's network namespace, what the
// agent's networking with options o put on the node outside its data directory: the Service
// proxy's nftables table (o.Services.Table) with the Service CIDR's unreachable route and
// the per-ClusterIP routes, the NetworkPolicy table (o.NetworkPolicy.Table), the cluster
// DNS link (o.DNS.Interface), the routes to other nodes' pod CIDRs inside o.ClusterCIDR
// (every one of Kube's when it is empty) and the cluster CIDR's unreachable route. The pod
// bridge is left (pods may still run on it). Absent things are no error, so it is
// idempotent; it returns what it did, one line per thing, and every error. `kube agent
// --cleanup` runs it; the in-process agent's owner (kube server) may call it with the same
// options it gave agent.New. Run no agent with o meanwhile.
func CleanupNetworking(ctx context.Context, o Options) ([]string, error) {
	o.Defaults()
	svcTable := o.Services.Table
	if svcTable == "" {
		svcTable = "kube-proxy"
	}
	npTable := o.NetworkPolicy.Table
	if npTable == "" {
		npTable = netpol.DefaultTable
	}
	dnsLink := o.DNS.Interface
	if dnsLink == "" {
		dnsLink = DefaultDNSInterface
	}
	var done []string
	var errs []error
	step := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %s: %w", what, err))
			return
		}
		done = append(done, what)
	}
	step(fmt.Sprintf("nftables table ip %s, the unreachable route of %s and the ClusterIP routes", svcTable, o.ServiceCIDR),
		proxy.Cleanup(ctx, svcTable, o.ServiceCIDR))
	step("nftables table ip "+npTable, netpol.Cleanup(ctx, npTable))
	agentdns.RemoveLink(ctx, dnsLink)
	step("link "+dnsLink, nil)
	scope := o.ClusterCIDR
	if scope == "" {
		scope = "every cluster CIDR"
	}
	step("routes to other nodes' pod CIDRs ("+scope+")", routes.Cleanup(nil, o.ClusterCIDR))
	if p, err := netip.ParsePrefix(o.ClusterCIDR); err == nil {
		cni.DeleteUnreachable(ctx, p)
		step("unreachable route of "+p.Masked().String(), nil)
	}
	return done, errors.Join(errs...)
}
