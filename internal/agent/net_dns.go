package agent

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentdns "kubeos.dev/kube/internal/agent/dns"
)

// DefaultDNSInterface holds the cluster DNS address on the node.
const DefaultDNSInterface = "kube-dns0"

// DNSOptions configure the node-local cluster DNS (the CoreDNS role); internal/agent/dns does the work.
type DNSOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default).
	Enabled bool
	// Interface holds the DNS address as a /32 (default kube-dns0; created, a dummy link
	// or an empty bridge).
	Interface string
	// Address is where it answers (default: the kube-dns Service's ClusterIP, followed).
	Address string
	// Port and MetricsPort: DNS (default 53) and /metrics (default 9153; -1 none), on the
	// address.
	Port, MetricsPort int
	// Registry receives coredns_dns_* metrics (default: a registry of its own, served on
	// MetricsPort).
	Registry *prometheus.Registry
	// Ready, when set, is called with the address once it answers there (tests).
	Ready func(netip.Addr)
}

func (o *DNSOptions) validate() error {
	if len(o.Interface) > 15 {
		return fmt.Errorf("agent: --dns-interface %q is longer than 15 characters", o.Interface)
	}
	if o.Address != "" {
		if _, err := netip.ParseAddr(o.Address); err != nil {
			return fmt.Errorf("agent: --dns-address: %w", err)
		}
	}
	if o.Port < 0 || o.Port > 65535 || o.MetricsPort < -1 || o.MetricsPort > 65535 {
		return fmt.Errorf("agent: --dns-port %d / --dns-metrics-port %d: out of range", o.Port, o.MetricsPort)
	}
	return nil
}

// clusterDNS prepares the node-local cluster DNS (the CoreDNS role) when enabled and returns what runs it until ctx ends (nil when
// disabled).
func (a *Agent) clusterDNS(ctx context.Context) (func(context.Context) error, error) {
	o := a.opts.DNS
	if !o.Enabled {
		return nil, nil
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	iface := o.Interface
	if iface == "" {
		iface = DefaultDNSInterface
	}
	return func(ctx context.Context) error {
		return agentdns.Run(ctx, agentdns.Options{
			Client: a.netClient(), Zone: a.opts.ClusterDomain, Address: o.Address, Port: o.Port, MetricsPort: o.MetricsPort,
			Interface: iface, ResolvConf: a.opts.ResolvConf, Registry: o.Registry, Ready: o.Ready,
			Log: a.log.With("component", "dns"),
		})
	}, nil
}

// clusterDNSServers is what ClusterFirst pods get as nameservers: Options.ClusterDNS,
// else (the DNS enabled) the kube-dns Service's ClusterIP read from the API, waiting up
// to 30 s for the server to create it. Empty when neither is known.
func (a *Agent) clusterDNSServers(ctx context.Context) []string {
	if len(a.opts.ClusterDNS) > 0 {
		return a.opts.ClusterDNS
	}
	if !a.opts.DNS.Enabled {
		return nil
	}
	if a.opts.DNS.Address != "" {
		return []string{a.opts.DNS.Address}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		svc, err := a.client.CoreV1().Services(agentdns.ServiceNamespace).Get(ctx, agentdns.ServiceName, metav1.GetOptions{})
		if err == nil && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != "None" {
			return []string{svc.Spec.ClusterIP}
		}
		if err != nil && !apierrors.IsNotFound(err) {
			a.log.Warn("cluster DNS Service", "err", err)
		}
		select {
		case <-ctx.Done():
			a.log.Warn("no cluster DNS address for ClusterFirst pods: kube-system/kube-dns not found")
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}
