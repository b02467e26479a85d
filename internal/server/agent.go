package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/rbac"
)

// AgentOptions configure the in-process node agent (`kube server --agent`, internal/agent).
type AgentOptions struct {
	// Agent runs a node agent in the server's process.
	Agent bool
	// AgentNodeName is its Node's name (default: the hostname).
	AgentNodeName string
	// AgentDataDir is its data directory (default DataDir/agent).
	AgentDataDir string
	// AgentPort is its HTTPS API port (default 10250; 0 picks a free one).
	AgentPort int
	// AgentPodCIDR is the pod CIDR when node IPAM gives the Node none.
	AgentPodCIDR string
	// AgentBridge is the pod bridge's name (default kube0).
	AgentBridge string
	// AgentNodeIP is the Node's InternalIP (default: the default-route interface's IPv4).
	AgentNodeIP string
	// AgentContainerRuntimeEndpoint is an existing CRI endpoint (default: its own containerd).
	AgentContainerRuntimeEndpoint string
	// AgentContainerdProxy is its own containerd's HTTP(S)_PROXY.
	AgentContainerdProxy string
	// AgentImageDir holds image archives imported at start.
	AgentImageDir string
	// AgentEvictionHard are the in-process agent's hard eviction thresholds (--eviction-hard
	// syntax; default InProcessEvictionHard).
	AgentEvictionHard string
	// AgentCgroupRoot is the parent of the in-process agent's kubepods cgroup (default "/").
	AgentCgroupRoot string
	// AgentClusterDNS and AgentResolvConf make the pods' resolv.conf.
	AgentClusterDNS []string
	AgentResolvConf string
	// AgentServices, AgentDNS and AgentNetworkPolicy: its Service proxy, cluster DNS and
	// NetworkPolicy enforcement (flags --agent-services..., internal/cli).
	AgentServices      agent.ServicesOptions
	AgentDNS           agent.DNSOptions
	AgentNetworkPolicy agent.NetworkPolicyOptions
	// AgentGateway is its HTTP(S) gateway for Routes (flags --agent-gateway...).
	AgentGateway agent.GatewayOptions
}

func (o *AgentOptions) validate() error {
	if !o.Agent {
		return nil
	}
	if o.AgentPort < 0 || o.AgentPort > 65535 {
		return fmt.Errorf("--agent-port %d: out of range", o.AgentPort)
	}
	if len(o.AgentBridge) > 15 {
		return errors.New("--agent-bridge: at most 15 characters")
	}
	return nil
}

// startAgent starts the in-process node agent when asked for; it stops when ctx ends and wg
// tracks it. It acts as system:node:<name> in system:nodes, as a separate agent would.
func (s *Server) startAgent(ctx context.Context, wg *sync.WaitGroup) error {
	o := s.opts.AgentOptions
	if !o.Agent {
		return nil
	}
	name := o.AgentNodeName
	if name == "" {
		h, _ := os.Hostname()
		name = strings.ToLower(h)
	}
	dir := o.AgentDataDir
	if dir == "" {
		dir = filepath.Join(s.opts.DataDir, "agent")
	}
	// The extra group lets its Service proxy, DNS and NetworkPolicy read cluster-wide
	// (rbac.NodeNetworkingRole) while the Node authorizer still isolates it as a node.
	groups := []string{"system:nodes", rbac.NodeNetworkingGroup}
	if o.AgentGateway.Enabled {
		groups = append(groups, rbac.NodeGatewayGroup) // the gateway reads Certificates' TLS Secrets
	}
	cfg, err := s.LoopbackConfig("system:node:"+name, groups...)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	evictionHard := o.AgentEvictionHard
	if evictionHard == "" {
		evictionHard = InProcessEvictionHard
	}
	// On a loopback bind (the default) nothing listens at the address the kubernetes
	// Service lists: the agent's Service proxy sends that Service's traffic to the
	// loopback listener itself (agent.ServicesOptions.LoopbackAPIServer).
	services := o.AgentServices
	if ip := net.ParseIP(s.opts.BindAddress); ip != nil && ip.IsLoopback() && services.LoopbackAPIServer == "" {
		services.LoopbackAPIServer = agent.LoopbackAPIServer(s.URL)
	}
	a, err := agent.New(agent.Options{
		NodeName: name, DataDir: dir, Config: cfg, Port: o.AgentPort, PodCIDR: o.AgentPodCIDR,
		ClusterCIDR: s.opts.ClusterCIDR, Bridge: o.AgentBridge, NodeIP: o.AgentNodeIP,
		ContainerRuntimeEndpoint: o.AgentContainerRuntimeEndpoint, ContainerdProxy: o.AgentContainerdProxy,
		ImageDir: o.AgentImageDir, ClusterDNS: o.AgentClusterDNS, ResolvConf: o.AgentResolvConf,
		ServiceCIDR: strings.Split(s.opts.ServiceClusterIPRange, ",")[0],
		Services:    services, DNS: o.AgentDNS, NetworkPolicy: o.AgentNetworkPolicy,
		Gateway: o.AgentGateway, EvictionHard: evictionHard, CgroupRoot: o.AgentCgroupRoot,
		Log: s.opts.Log,
	})
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.Run(ctx); err != nil {
			s.opts.Log.Error("node agent stopped", "err", err)
		}
	}()
	return nil
}

// InProcessEvictionHard is the in-process agent's default eviction threshold: memory only.
// That agent shares its disk with etcd and the control plane, where evicting pods frees
// little and a nearly full disk (a laptop, a CI machine) would otherwise evict every pod
// the user runs; kind's nodes turn disk eviction off for the same reason. `kube agent`
// keeps the kubelet's defaults (eviction.DefaultHard); --agent-eviction-hard sets these.
const InProcessEvictionHard = "memory.available<100Mi"
