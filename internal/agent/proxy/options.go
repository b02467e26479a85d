package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// ErrNoNFTables is returned by New when the node cannot program nftables (no nf_tables in
// the kernel, no CAP_NET_ADMIN, or Options.Probe said so). The agent keeps running its pods
// and retries; there is no userspace fallback.
var ErrNoNFTables = errors.New("nftables is not available on this node")

// SkipAnnotation marks a Service the proxy leaves alone (the cluster DNS Service, answered
// by the node-local DNS on its own address).
const SkipAnnotation = "kubeos.dev/node-local-dns"

// Options configure a Proxier; New fills the defaults.
type Options struct {
	// Client lists and watches Services and EndpointSlices (the node's identity).
	Client kubernetes.Interface
	// NodeName is this node (endpoints with that nodeName are local).
	NodeName string
	// NodeIP is the node's InternalIP: NodePorts answer there.
	NodeIP string
	// Table is the nftables table (family ip) the proxy owns (default "kube-proxy").
	Table string
	// ServiceCIDR is the Service cluster IP range: it gets the unreachable route.
	ServiceCIDR string
	// ClusterCIDR is the pods' range: traffic from elsewhere to a ClusterIP is masqueraded
	// ("" masquerades none of it).
	ClusterCIDR string
	// APIServer, when set, is the loopback address:port (IPv4) of an API server that
	// listens on loopback only (kube server's default bind, 127.0.0.1): the kubernetes
	// Service's ClusterIP traffic (default/kubernetes, port https) is DNATed there instead
	// of to the endpoints the Service lists (the host's public address, where nothing
	// listens). Pods on Bridge reach it (loopback.go); so do the node's own processes.
	APIServer string
	// Bridge is the pods' bridge: with APIServer, its route_localnet is turned on (a
	// packet from it may be routed to a loopback address) and a guard rule drops whatever
	// arrives on it for a loopback address without the proxy's DNAT. "" serves APIServer
	// to the node's own processes only.
	Bridge string
	// Log receives the proxy's messages.
	Log *slog.Logger
	// Recorder, when set, receives the proxy's Events (a Warning on an EndpointSlice whose
	// addresses it ignores, once per revision of the slice).
	Recorder record.EventRecorder
	// Probe, when set, is asked first by New whether this node can program nftables; an
	// error makes New fail with ErrNoNFTables as a kernel without nf_tables would. Tests
	// use it to stand for such a kernel without breaking the machine's; nil asks only the
	// kernel (New's own transaction).
	Probe func() error
	// Synced, when set, is called after each sync that programmed changes (benchmarks).
	Synced func(SyncEvent)
}

// SyncEvent describes one sync whose rules are in the kernel.
type SyncEvent struct {
	// At is when the kernel had the rules (the netlink transaction returned).
	At time.Time
	// Took is the sync's duration.
	Took time.Duration
	// Services are the namespace/name of the Services whose Service or EndpointSlices
	// changed since the previous sync.
	Services []string
	// Chains, Elements: per-service chains written or deleted, map elements changed.
	Chains, Elements int
}

// parsed are the options in the form the rules need.
type parsed struct {
	nodeIP      netip.Addr
	serviceCIDR netip.Prefix
	clusterCIDR netip.Prefix
	// apiServer is Options.APIServer (invalid when unset).
	apiServer netip.AddrPort
	// localnetBridge is Options.Bridge when there is an API server on loopback to reach
	// from it: its route_localnet is on and the loopback guard names it ("" otherwise).
	localnetBridge string
}

func (o *Options) defaults() {
	if o.Table == "" {
		o.Table = "kube-proxy"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (o *Options) parse() (parsed, error) {
	var p parsed
	var err error
	if o.Client == nil {
		return p, errors.New("proxy: a client is required")
	}
	if o.NodeName == "" {
		return p, errors.New("proxy: a node name is required")
	}
	if o.NodeIP != "" {
		if p.nodeIP, err = netip.ParseAddr(o.NodeIP); err != nil || !p.nodeIP.Is4() {
			return p, fmt.Errorf("proxy: node IP %q: not an IPv4 address", o.NodeIP)
		}
	}
	if p.serviceCIDR, err = netip.ParsePrefix(o.ServiceCIDR); err != nil || !p.serviceCIDR.Addr().Is4() {
		return p, fmt.Errorf("proxy: Service CIDR %q: not an IPv4 prefix", o.ServiceCIDR)
	}
	p.serviceCIDR = p.serviceCIDR.Masked()
	if o.ClusterCIDR != "" {
		if p.clusterCIDR, err = netip.ParsePrefix(o.ClusterCIDR); err != nil || !p.clusterCIDR.Addr().Is4() {
			return p, fmt.Errorf("proxy: cluster CIDR %q: not an IPv4 prefix", o.ClusterCIDR)
		}
		p.clusterCIDR = p.clusterCIDR.Masked()
	}
	if o.APIServer != "" {
		if p.apiServer, err = netip.ParseAddrPort(o.APIServer); err != nil || !p.apiServer.Addr().Is4() ||
			!p.apiServer.Addr().IsLoopback() || p.apiServer.Port() == 0 {
			return p, fmt.Errorf("proxy: API server %q: not an IPv4 loopback address:port", o.APIServer)
		}
	}
	if len(o.Bridge) > 15 || strings.ContainsAny(o.Bridge, "/ ") || o.Bridge == "." || o.Bridge == ".." {
		return p, fmt.Errorf("proxy: bridge %q: not an interface name", o.Bridge)
	}
	if p.apiServer.IsValid() {
		p.localnetBridge = o.Bridge
	}
	if len(o.Table) > 200 {
		return p, fmt.Errorf("proxy: table name %q too long", o.Table)
	}
	return p, nil
}
