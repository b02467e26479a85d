package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/servicealloc"
)

// Options configure a Kube server. The zero value plus Complete is a working single-node
// server on embedded etcd.
type Options struct {
	// DataDir holds etcd's data (embedded mode), the PKI and the admin kubeconfig.
	// Default: $HOME/.local/share/kube.
	DataDir string
	// PKIDir holds the CA, serving, admin and service-account keys. Default: DataDir/pki.
	// Servers that share one etcd cluster (high availability) point it at the same
	// directory (or copies of it), so that they trust the same CA and sign the same tokens.
	PKIDir string
	// BindAddress and SecurePort are where HTTPS is served. Defaults 127.0.0.1 and 6443; port
	// 0 takes a free port (tests).
	BindAddress string
	SecurePort  int
	// AdvertiseAddress is added to the serving certificate and used in the kubeconfig when
	// the bind address is a wildcard.
	AdvertiseAddress string
	// EtcdServers points at an external etcd cluster; empty runs an embedded member.
	EtcdServers                           []string
	EtcdCertFile, EtcdKeyFile, EtcdCAFile string
	// EtcdServersOverrides is kube-apiserver's --etcd-servers-overrides: entries
	// "group/resource#servers" (servers semicolon-separated URLs, e.g.
	// "/events#http://127.0.0.1:2479") whose resource is stored in, watched from and
	// compacted in that etcd cluster instead of the main one (embedded or EtcdServers).
	// Clients use the EtcdCertFile, EtcdKeyFile and EtcdCAFile of the main cluster, as
	// upstream's. Unlike upstream it also applies to custom resources.
	EtcdServersOverrides []string
	// KubeletPreferredAddressTypes are the node address types tried, in order, to reach a
	// node's agent (kube-apiserver's --kubelet-preferred-address-types); nil means
	// InternalIP, ExternalIP, Hostname, as kubeadm configures kube-apiserver (whose own
	// default tries Hostname first, which control planes often cannot resolve).
	KubeletPreferredAddressTypes []string
	// KubeletCertificateAuthority is a CA file that node agents' serving certificates must
	// chain to; empty means they are not verified, as kube-apiserver's
	// --kubelet-certificate-authority (a kubelet's default certificate is self-signed).
	KubeletCertificateAuthority string
	// ClusterSigningDuration caps the lifetime of certificates signed for approved CSRs
	// (kube-controller-manager's --cluster-signing-duration); zero means one year.
	ClusterSigningDuration time.Duration
	// DenyPrivileged refuses pods with privileged containers in validation, as
	// kube-apiserver's --allow-privileged=false (its default). Kube allows them by default, as
	// kubeadm, kind and k3s configure kube-apiserver: PodSecurity admission is where a
	// namespace refuses them.
	DenyPrivileged bool
	// EtcdUnsafeNoFsync turns fsync off in the embedded member (benchmarks only).
	EtcdUnsafeNoFsync bool
	// CompactionInterval is how often etcd history is compacted; 0 disables.
	CompactionInterval time.Duration
	// WatchCacheSize is the number of recent events each resource's watch cache keeps, at
	// least.
	WatchCacheSize int
	// WatchCacheMaxSize is the most recent events a resource's watch cache grows to while
	// they are younger than 75 s (kube-apiserver's 102,400; watchcache.Options). Equal to
	// WatchCacheSize: a fixed size. Default 102,400.
	WatchCacheMaxSize int
	// Out receives the start-up message (data directory, KUBECONFIG line, ready).
	Out io.Writer
	// Log is the server's logger.
	Log *slog.Logger
	// TokenAuthFile is upstream's static token file (CSV: token,user,uid,"group1,group2").
	TokenAuthFile string
	// ServiceAccountIssuer is the iss claim, and default audience, of service-account
	// tokens. Default https://kubernetes.default.svc.
	ServiceAccountIssuer string
	// AdmissionAuditOptions: admission webhook client certificate, audit log, encryption
	// at rest (security.go).
	AdmissionAuditOptions
	// LifecycleOptions: the lifecycle engine's event bus (lifecycle.go).
	LifecycleOptions
	// --- Services (internal/servicealloc, services.go) ---
	// ServiceClusterIPRange is --service-cluster-ip-range: the CIDR cluster IPs come from,
	// or two of different families for dual-stack; its first address is the kubernetes
	// Service's. Default servicealloc.DefaultServiceClusterIPRange (10.96.0.0/12).
	ServiceClusterIPRange string
	// ServiceNodePortRange is --service-node-port-range. Default 30000-32767.
	ServiceNodePortRange string
	// --- end Services ---
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight are --max-requests-inflight and
	// --max-mutating-requests-inflight (defaults 400 and 200), as upstream interprets them:
	// with API priority and fairness their sum is the server's total concurrency limit,
	// shared among the priority levels (so one of them may be 0); without it, the two
	// separate limits, 0 disabling one. Both 0 (the zero Options) take the defaults.
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// DisablePriorityAndFairness is --enable-priority-and-fairness=false: the two in-flight
	// limits instead of API priority and fairness.
	DisablePriorityAndFairness bool
	// SchedulerOptions: the in-process scheduler (scheduler.go, internal/scheduler).
	SchedulerOptions
	// SimNodeOptions: simulated nodes (simnodes.go, internal/simnode).
	SimNodeOptions
	// WorkloadControllerOptions: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
	// CronJob, … controllers (controllers_apps.go).
	WorkloadControllerOptions
	// ClusterControllerOptions: EndpointSlice, node lifecycle, node IPAM, quota, PV
	// binding, HPA, pod GC, … controllers (controllers_cluster.go).
	ClusterControllerOptions
	// AgentOptions: the in-process node agent, `kube server --agent` (agent.go,
	// internal/agent).
	AgentOptions
	// ClusterDNSOptions: the cluster DNS Service (kube-system/kube-dns) the agents answer on
	// (clusterdns.go).
	ClusterDNSOptions
	// DataServicesOptions: the embedded data servers the data kinds provision on
	// (dataservices.go, internal/dataservices).
	DataServicesOptions
}

// DefaultDataDir is where a server keeps its state unless told otherwise.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "kube")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(os.TempDir(), "kube")
	}
	return filepath.Join(home, ".local", "share", "kube")
}

// Complete fills the defaults.
func (o *Options) Complete() {
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir()
	}
	if o.PKIDir == "" {
		o.PKIDir = filepath.Join(o.DataDir, "pki")
	}
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1"
	}
	if o.WatchCacheSize == 0 {
		o.WatchCacheSize = 1000
	}
	if o.WatchCacheMaxSize == 0 {
		o.WatchCacheMaxSize = 100 * 1024
	}
	// --- Services ---
	if o.ServiceClusterIPRange == "" {
		o.ServiceClusterIPRange = servicealloc.DefaultServiceClusterIPRange
	}
	if o.ServiceNodePortRange == "" {
		o.ServiceNodePortRange = servicealloc.DefaultServiceNodePortRange
	}
	// --- end Services ---
	if o.MaxRequestsInFlight == 0 && o.MaxMutatingRequestsInFlight == 0 {
		o.MaxRequestsInFlight, o.MaxMutatingRequestsInFlight = 400, 200
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Validate names the first bad option by its flag.
func (o *Options) Validate() error {
	if net.ParseIP(o.BindAddress) == nil {
		return fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress)
	}
	// upstream's messages
	if o.MaxRequestsInFlight < 0 {
		return errors.New("--max-requests-inflight can not be negative value")
	}
	if o.MaxMutatingRequestsInFlight < 0 {
		return errors.New("--max-mutating-requests-inflight can not be negative value")
	}
	if o.SecurePort < 0 || o.SecurePort > 65535 {
		return fmt.Errorf("--secure-port %d is out of range", o.SecurePort)
	}
	if o.ClusterSigningDuration < 0 {
		return errors.New("--cluster-signing-duration must not be negative")
	}
	for _, t := range o.KubeletPreferredAddressTypes {
		switch corev1.NodeAddressType(t) {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeInternalIP, corev1.NodeExternalDNS, corev1.NodeExternalIP:
		default:
			return fmt.Errorf("--kubelet-preferred-address-types: %q is not one of Hostname, InternalDNS, InternalIP, ExternalDNS, ExternalIP", t)
		}
	}
	if o.AdvertiseAddress != "" && net.ParseIP(o.AdvertiseAddress) == nil {
		return fmt.Errorf("--advertise-address %q is not an IP address", o.AdvertiseAddress)
	}
	if o.CompactionInterval < 0 {
		return errors.New("--etcd-compaction-interval must not be negative")
	}
	if o.WatchCacheMaxSize < o.WatchCacheSize {
		return fmt.Errorf("--watch-cache-max-size %d is less than --watch-cache-size %d (equal: a fixed size)", o.WatchCacheMaxSize, o.WatchCacheSize)
	}
	if o.WatchCacheSize < 10 {
		return fmt.Errorf("--watch-cache-size %d is too small (at least 10)", o.WatchCacheSize)
	}
	if len(o.EtcdServers) == 0 && len(o.EtcdServersOverrides) == 0 && (o.EtcdCertFile != "" || o.EtcdKeyFile != "" || o.EtcdCAFile != "") {
		return errors.New("--etcd-certfile, --etcd-keyfile and --etcd-cafile need --etcd-servers or --etcd-servers-overrides")
	}
	if _, err := etcd.ParseServersOverrides(o.EtcdServersOverrides); err != nil {
		return err
	}
	if (o.EtcdCertFile == "") != (o.EtcdKeyFile == "") {
		return errors.New("--etcd-certfile and --etcd-keyfile go together")
	}
	if err := o.SchedulerOptions.validate(); err != nil {
		return err
	}
	if err := o.SimNodeOptions.validate(); err != nil {
		return err
	}
	if err := o.WorkloadControllerOptions.validate(); err != nil {
		return err
	}
	if err := o.ClusterControllerOptions.validate(); err != nil {
		return err
	}
	if err := o.ClusterDNSOptions.validate(); err != nil {
		return err
	}
	if err := o.AgentOptions.validate(); err != nil {
		return err
	}
	if err := o.DataServicesOptions.validate(); err != nil {
		return err
	}
	if err := o.LifecycleOptions.validate(); err != nil {
		return err
	}
	// --- Services ---
	if _, err := servicealloc.ParseRanges(o.ServiceClusterIPRange, o.ServiceNodePortRange); err != nil {
		return err
	}
	// --- end Services ---
	return o.AdmissionAuditOptions.validate()
}
