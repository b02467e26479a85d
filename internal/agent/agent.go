package agent

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/agent/cgroups"
	"kubeos.dev/kube/internal/agent/cni"
	"kubeos.dev/kube/internal/agent/eviction"
	"kubeos.dev/kube/internal/agent/images"
	"kubeos.dev/kube/internal/agent/pods"
	agentruntime "kubeos.dev/kube/internal/agent/runtime"
	"kubeos.dev/kube/internal/agent/server"
	"kubeos.dev/kube/internal/agent/stats"
)

// Options configure an agent. Defaults fills the empty ones.
type Options struct {
	// NodeName is the Node's name (default: the hostname).
	NodeName string
	// DataDir holds everything the agent owns: containerd, pod volumes, logs, certificates.
	DataDir string
	// Config is the API client configuration, acting as system:node:<NodeName>.
	Config *rest.Config
	// ContainerRuntimeEndpoint is an existing CRI endpoint; empty starts the agent's own
	// containerd.
	ContainerRuntimeEndpoint string
	// ContainerdProxy is the own containerd's HTTP(S)_PROXY (tests: a closed loopback port).
	ContainerdProxy string
	// CNIBinDir holds the CNI plugins (default /usr/lib/cni, Debian's).
	CNIBinDir string
	// Bridge is the pod network's bridge (default kube0).
	Bridge string
	// PodCIDR is used when the Node has no spec.podCIDR (the server's node IPAM sets it).
	PodCIDR string
	// ClusterCIDR gets the unreachable route (default: the pod CIDR).
	ClusterCIDR string
	// NodeIP is the InternalIP address (default: the default-route interface's IPv4).
	NodeIP string
	// Address and Port are where the HTTPS API listens (default 0.0.0.0:10250; port 0
	// picks a free one).
	Address string
	Port    int
	// ClientCAFile verifies API callers' client certificates (default: Config's CA).
	ClientCAFile string
	// ImageDir: every *.tar there is imported at start.
	ImageDir string
	// ClusterDNS, ClusterDomain and ResolvConf make the pods' resolv.conf.
	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string
	// MaxPods is the pods capacity (default 110).
	MaxPods int
	// SystemReserved and KubeReserved are taken off capacity for allocatable.
	SystemReserved, KubeReserved corev1.ResourceList
	// ServiceCIDR is the Service cluster IP range (default 10.96.0.0/12, the server's
	// --service-cluster-ip-range): it gets an unreachable route on the node, and the cluster
	// DNS address defaults to its tenth address.
	ServiceCIDR string
	// Services, DNS and NetworkPolicy configure the node's Service proxy, its cluster DNS
	// and NetworkPolicy enforcement (net_services.go, net_dns.go, net_netpol.go).
	Services      ServicesOptions
	DNS           DNSOptions
	NetworkPolicy NetworkPolicyOptions
	// Gateway configures the node's HTTP(S) gateway for Routes (net_gateway.go).
	Gateway GatewayOptions
	// EvictionHard are the hard eviction thresholds in --eviction-hard syntax (default
	// eviction.DefaultHard, the kubelet's; "none": no threshold, only the pods' own local
	// storage limits are enforced).
	EvictionHard string
	// EvictionPressureTransitionPeriod is how long a pressure condition stays after its
	// threshold is no longer met (default 5 min).
	EvictionPressureTransitionPeriod time.Duration
	// ShutdownGracePeriod is the time a graceful node shutdown (the agent's context ending,
	// SIGTERM to kube agent) has to stop the node's pods before the agent exits; 0 (the
	// default) leaves the pods running. ShutdownGracePeriodCriticalPods is the part of it
	// kept for critical pods, stopped last.
	ShutdownGracePeriod, ShutdownGracePeriodCriticalPods time.Duration
	// CgroupRoot is the parent of the pods' kubepods cgroup (the kubelet's --cgroup-root,
	// default "/"); NoCgroupsPerQOS leaves pod cgroups to the runtime's defaults (the
	// kubelet's --cgroups-per-qos=false).
	CgroupRoot      string
	NoCgroupsPerQOS bool
	// ReleaseStartupMemory, once the agent has started, drops the pages of the executable
	// that only its start touched from its resident set and returns the start's heap
	// garbage (memory.go). For `kube agent`, a process of its own; not for an agent inside
	// `kube server`, whose control plane uses those pages.
	ReleaseStartupMemory bool
	// Log receives the agent's messages.
	Log *slog.Logger
}

// Defaults fills the empty fields.
func (o *Options) Defaults() {
	if o.NodeName == "" {
		h, _ := os.Hostname()
		o.NodeName = strings.ToLower(h)
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/usr/lib/cni"
	}
	if o.Bridge == "" {
		o.Bridge = "kube0"
	}
	if o.Address == "" {
		o.Address = "0.0.0.0"
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.ResolvConf == "" {
		o.ResolvConf = "/etc/resolv.conf"
	}
	if o.MaxPods == 0 {
		o.MaxPods = 110
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.96.0.0/12"
	}
	if o.EvictionHard == "" {
		o.EvictionHard = eviction.DefaultHard
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Validate names the bad option.
func (o *Options) Validate() error {
	var errs []error
	if o.DataDir == "" {
		errs = append(errs, errors.New("agent: a data directory is required"))
	}
	if o.Config == nil {
		errs = append(errs, errors.New("agent: an API client configuration (--kubeconfig) is required"))
	}
	for flag, c := range map[string]string{"--pod-cidr": o.PodCIDR, "--cluster-cidr": o.ClusterCIDR, "--service-cidr": o.ServiceCIDR} {
		if c != "" {
			if _, err := netip.ParsePrefix(c); err != nil {
				errs = append(errs, fmt.Errorf("agent: %s: %w", flag, err))
			}
		}
	}
	if o.EvictionHard != "none" {
		if _, err := eviction.ParseThresholds(o.EvictionHard); err != nil {
			errs = append(errs, fmt.Errorf("agent: %w", err))
		}
	}
	if o.ShutdownGracePeriod < 0 || o.ShutdownGracePeriodCriticalPods < 0 {
		errs = append(errs, errors.New("agent: --shutdown-grace-period and --shutdown-grace-period-critical-pods must not be negative"))
	}
	if o.ShutdownGracePeriodCriticalPods > o.ShutdownGracePeriod {
		errs = append(errs, fmt.Errorf("agent: --shutdown-grace-period-critical-pods %s is longer than --shutdown-grace-period %s", o.ShutdownGracePeriodCriticalPods, o.ShutdownGracePeriod))
	}
	if o.EvictionPressureTransitionPeriod < 0 {
		errs = append(errs, errors.New("agent: --eviction-pressure-transition-period must not be negative"))
	}
	if len(o.Bridge) > 15 {
		errs = append(errs, fmt.Errorf("agent: --bridge %q is longer than 15 characters", o.Bridge))
	}
	return errors.Join(errs...)
}

// Agent is one node agent.
type Agent struct {
	opts        Options
	log         *slog.Logger
	client      kubernetes.Interface
	cri         *agentruntime.Services
	machine     machine
	allocatable corev1.ResourceList
	nodeIP      string
	port        int
	statusNow   chan struct{}

	stats     *stats.Provider
	evictions *eviction.Manager
	metrics   *prometheus.Registry

	mu              sync.Mutex
	podCIDR         string
	network         cni.Network
	shuttingDown    bool
	lastStatusWrite time.Time
}

// New checks o and makes an agent; Run runs it.
func New(o Options) (*Agent, error) {
	o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{opts: o, log: o.Log.With("component", "agent", "node", o.NodeName), client: cs, statusNow: make(chan struct{}, 1)}
	a.nodeIP = o.NodeIP
	if a.nodeIP == "" {
		a.nodeIP = defaultRouteIP()
	}
	return a, nil
}

// Run runs the agent until ctx ends; with a ShutdownGracePeriod it then stops the node's
// pods (shutdown.go) before it returns.
func (a *Agent) Run(outer context.Context) error {
	o := a.opts
	// The agent's own context outlives outer by the graceful shutdown, once pods run.
	ctx, cancel := context.WithCancel(context.WithoutCancel(outer))
	defer cancel()
	running := make(chan struct{})
	stopEarly := context.AfterFunc(outer, func() {
		select {
		case <-running:
		default:
			cancel()
		}
	})
	defer stopEarly()
	var wg sync.WaitGroup
	// ctx does not end with outer: cancel it before waiting for what runs under it.
	defer func() { cancel(); wg.Wait() }()
	for _, d := range []string{o.DataDir, filepath.Join(o.DataDir, "images"), filepath.Join(o.DataDir, "pki")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	a.machine = readMachine(o.DataDir, o.MaxPods)
	a.allocatable = allocatable(a.machine.capacity, o.SystemReserved, o.KubeReserved)

	// Runtime.
	endpoint := o.ContainerRuntimeEndpoint
	layout := agentruntime.Layout{Dir: filepath.Join(o.DataDir, "containerd")}
	if endpoint == "" {
		ctrd := &agentruntime.Containerd{Layout: layout, Proxy: o.ContainerdProxy, Log: a.log,
			Config: agentruntime.ConfigOptions{SandboxImage: images.PauseRef, CNIBinDir: o.CNIBinDir}}
		if err := ctrd.Start(ctx, &wg); err != nil {
			return err
		}
		endpoint = layout.Endpoint()
		pause := filepath.Join(o.DataDir, "images", "pause.tar")
		if err := images.WritePause(pause); err != nil {
			return err
		}
		if err := images.Import(ctx, layout.Socket(), pause); err != nil {
			return err
		}
		if o.ImageDir != "" {
			done, err := images.ImportDir(ctx, layout.Socket(), o.ImageDir)
			if err != nil {
				return err
			}
			a.log.Info("images imported", "files", done)
		}
	}
	cri, err := agentruntime.Connect(ctx, endpoint)
	if err != nil {
		return err
	}
	a.cri = cri

	// Node and network.
	node, err := a.register(ctx)
	if err != nil {
		return err
	}
	a.setPodCIDR(node.Spec.PodCIDR)

	// HTTPS API.
	caPool, err := a.clientCA()
	if err != nil {
		return err
	}
	hosts := []string{o.NodeName, "localhost", "127.0.0.1"}
	if a.nodeIP != "" {
		hosts = append(hosts, a.nodeIP)
	}
	// ClusterFirst pods' nameserver: --cluster-dns, else the kube-dns Service's address.
	clusterDNS := a.clusterDNSServers(ctx)
	var hier *cgroups.Hierarchy
	if !o.NoCgroupsPerQOS {
		if hier, err = cgroups.New("", o.CgroupRoot); err == nil {
			err = hier.EnsureNode(a.allocatable)
		}
		if err != nil {
			return fmt.Errorf("agent: pod cgroups (--cgroups-per-qos=false runs without them): %w", err)
		}
		defer hier.Close()
	}
	mgr := pods.New(pods.Options{
		NodeName: o.NodeName, Client: a.client, Runtime: cri.Runtime, Images: cri.Images,
		RootDir: filepath.Join(o.DataDir, "kubelet"), LogDir: filepath.Join(o.DataDir, "pod-logs"),
		ClusterDNS: clusterDNS, ClusterDomain: o.ClusterDomain,
		HostDNS:     a.hostDNS,
		Allocatable: func() corev1.ResourceList { return a.allocatable },
		HostIP:      func() string { return a.nodeIP },
		Cgroups:     hier,
		Admit:       a.admit,
		Log:         a.log,
	})
	a.stats = stats.NewProvider(stats.Options{NodeName: o.NodeName, Runtime: cri.Runtime, Images: cri.Images, Pods: mgr.Pods,
		RootDir: filepath.Join(o.DataDir, "kubelet"), LogDir: filepath.Join(o.DataDir, "pod-logs"), NodeFsDir: o.DataDir})
	a.metrics = prometheus.NewRegistry()
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var thresholds []eviction.Threshold
	if o.EvictionHard != "none" {
		thresholds, _ = eviction.ParseThresholds(o.EvictionHard) // checked by Validate
	}
	a.evictions = eviction.NewManager(eviction.Options{Hard: thresholds, Summary: a.stats.Summary, Pods: mgr.Pods, Kill: mgr.Kill,
		PressureTransitionPeriod: o.EvictionPressureTransitionPeriod, Registerer: a.metrics, Log: a.log,
		Changed: func() {
			select {
			case a.statusNow <- struct{}{}:
			default:
			}
		}})
	srv, err := server.Listen(server.Options{Addr: net.JoinHostPort(o.Address, fmt.Sprint(o.Port)), NodeName: o.NodeName, ClientCA: caPool,
		CertDir: filepath.Join(o.DataDir, "pki"), Hosts: hosts, Client: a.client, Pods: mgr, Runtime: cri.Runtime,
		Volumes: LocalVolumes{Dir: filepath.Join(o.DataDir, "volumes")}, Debug: map[string]http.Handler{"/debug/services": a.ServicesHandler(), "/healthz/services": a.ServicesHealthHandler()},
		Stats: a.stats, Metrics: a.metrics,
		Log: a.log})
	if err != nil {
		return err
	}
	a.port = srv.Port()
	a.log.Info("agent API listening", "port", a.port)
	errc := make(chan error, 8)
	a.startNetworking(ctx, &wg, errc)
	a.startGateway(ctx, &wg)
	wg.Add(5)
	go func() { defer wg.Done(); errc <- srv.Serve(ctx) }()
	go func() { defer wg.Done(); a.reportStatus(ctx) }()
	go func() { defer wg.Done(); a.runLease(ctx) }()
	go func() { defer wg.Done(); errc <- mgr.Start(ctx) }()
	go func() { defer wg.Done(); errc <- a.evictions.Start(ctx) }()
	if o.ReleaseStartupMemory {
		wg.Add(1)
		go func() { defer wg.Done(); a.releaseAfterStart(ctx) }()
	}
	close(running)
	select {
	case <-outer.Done():
		if o.ShutdownGracePeriod > 0 && ctx.Err() == nil {
			a.shutdown(ctx, mgr)
		}
		return nil
	case <-ctx.Done():
		return nil
	case err := <-errc:
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}

// Port is the HTTPS API's port once Run has started it.
func (a *Agent) Port() int { return a.port }

// setPodCIDR writes the CNI configuration for cidr (the node's, else the flag's) when it
// changes.
func (a *Agent) setPodCIDR(nodeCIDR string) {
	cidr := nodeCIDR
	if cidr == "" {
		cidr = a.opts.PodCIDR
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if cidr == "" || cidr == a.podCIDR {
		return
	}
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		a.log.Error("pod CIDR", "cidr", cidr, "err", err)
		return
	}
	cluster := prefix
	if a.opts.ClusterCIDR != "" {
		cluster, _ = netip.ParsePrefix(a.opts.ClusterCIDR)
	}
	n := cni.Network{Name: "kube-" + a.opts.Bridge, Bridge: a.opts.Bridge, PodCIDR: prefix, IPAMDir: filepath.Join(a.opts.DataDir, "cni", "ipam"),
		Routes: podRoutes(cluster, a.opts.ServiceCIDR, a.nodeIP)}
	confDir := agentruntime.Layout{Dir: filepath.Join(a.opts.DataDir, "containerd")}.CNIConfDir()
	if err := cni.Write(confDir, n); err != nil {
		a.log.Error("cni configuration", "err", err)
		return
	}
	if err := cni.AddUnreachable(context.Background(), cluster); err != nil {
		a.log.Error("cluster route", "err", err)
	}
	a.podCIDR, a.network = cidr, n
	a.log.Info("pod network", "podCIDR", cidr, "bridge", n.Bridge, "clusterCIDR", cluster)
	select {
	case a.statusNow <- struct{}{}:
	default:
	}
}

// podRoutes are the destinations a pod reaches through its bridge: every pod of the
// cluster, every Service address and this node.
func podRoutes(cluster netip.Prefix, serviceCIDR, nodeIP string) []netip.Prefix {
	out := []netip.Prefix{cluster}
	if p, err := netip.ParsePrefix(serviceCIDR); err == nil {
		out = append(out, p)
	}
	if ip, err := netip.ParseAddr(nodeIP); err == nil && ip.Is4() {
		out = append(out, netip.PrefixFrom(ip, 32))
	}
	return out
}

func (a *Agent) hostDNS() (servers, searches, options []string) {
	b, err := os.ReadFile(a.opts.ResolvConf)
	if err != nil {
		return nil, nil, nil
	}
	return pods.ParseResolvConf(string(b))
}

func (a *Agent) clientCA() (*x509.CertPool, error) {
	var pem []byte
	var err error
	switch {
	case a.opts.ClientCAFile != "":
		pem, err = os.ReadFile(a.opts.ClientCAFile)
	case len(a.opts.Config.CAData) > 0:
		pem = a.opts.Config.CAData
	case a.opts.Config.CAFile != "":
		pem, err = os.ReadFile(a.opts.Config.CAFile)
	default:
		err = errors.New("no client CA: set --client-ca-file or a CA in the kubeconfig")
	}
	if err != nil {
		return nil, fmt.Errorf("agent: client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("agent: client CA: no certificate found")
	}
	return pool, nil
}

// defaultRouteIP is the IPv4 address of the interface holding the default route ("" when
// none).
func defaultRouteIP() string {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		ifc, err := net.InterfaceByName(fields[0])
		if err != nil {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String()
			}
		}
	}
	return ""
}

// Cleanup removes what the agent put on the host outside its data directory for network
// n: the bridge and the unreachable route (for tests and `kube agent --cleanup`).
func Cleanup(ctx context.Context, bridge string, clusterCIDR string) {
	cni.DeleteBridge(ctx, bridge)
	if p, err := netip.ParsePrefix(clusterCIDR); err == nil {
		cni.DeleteUnreachable(ctx, p)
	}
}
