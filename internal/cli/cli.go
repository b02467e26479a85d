package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/servicealloc"
)

// NewCommand returns the root command.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "kube",
		Short:         "Kube: a programmable control plane serving the Kubernetes API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newServerCommand(out, errOut), newEtcdCommand(out, errOut), newCertsCommand(out))
	root.AddCommand(newEncryptionCommand(out))
	root.AddCommand(agentCommands(out, errOut)...)
	root.AddCommand(simCommands(out, errOut)...)
	root.AddCommand(newCtlCommand(out, errOut))
	return root
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// defaultGCPercent is the server's GOGC unless the GOGC environment variable sets one. A
// control plane's heap is mostly long-lived state (watch caches, informers, compiled CRDs)
// while requests churn short-lived garbage; Go's default of 100 lets the garbage grow to the
// size of that state before collecting. 75 (Prometheus' default too) cut the RSS after
// creating 5,000 CRDs from ~300 to ~255 MB for 7-20 % more server CPU per custom-resource
// create (bench/README.md, "GC percent").
const defaultGCPercent = 75

// setDefaultGCPercent applies defaultGCPercent when GOGC is not set.
func setDefaultGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

func newServerCommand(out, errOut io.Writer) *cobra.Command {
	var o server.Options
	var logLevel string
	var allowPrivileged bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: etcd (embedded by default), the API server and the controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(errOut, logLevel)
			if err != nil {
				return err
			}
			setDefaultGCPercent()
			o.Out, o.Log = out, log
			o.DenyPrivileged = !allowPrivileged
			if o.MaxRequestsInFlight == 0 && o.MaxMutatingRequestsInFlight == 0 {
				// Both flags given as 0 (Complete would take them for unset Options).
				if !o.DisablePriorityAndFairness {
					return fmt.Errorf("invalid configuration: MaxRequestsInFlight=0 and MaxMutatingRequestsInFlight=0; they must add up to something positive") // upstream's message
				}
				o.MaxRequestsInFlight, o.MaxMutatingRequestsInFlight = math.MaxInt32, math.MaxInt32 // no limits, as upstream
			}
			o.Complete()
			if err := o.Validate(); err != nil {
				return err
			}
			if abs, err := filepath.Abs(o.DataDir); err == nil {
				o.DataDir = abs
			}
			if abs, err := filepath.Abs(o.PKIDir); err == nil {
				o.PKIDir = abs
			}
			ctx, stop := signalContext()
			defer stop()
			fmt.Fprintf(out, "Data directory: %s\n", o.DataDir)
			s, err := server.New(ctx, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Admin kubeconfig: %s\nexport KUBECONFIG=%s\n", s.KubeconfigPath, s.KubeconfigPath)
			return s.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", "", "directory for etcd data, the PKI and the admin kubeconfig (default "+server.DefaultDataDir()+")")
	f.StringVar(&o.PKIDir, "pki-dir", "", "directory of the CA, serving, admin and service-account keys (default <data-dir>/pki); servers sharing one etcd cluster use the same one")
	f.StringVar(&o.BindAddress, "bind-address", "127.0.0.1", "IP address to serve HTTPS on")
	f.IntVar(&o.SecurePort, "secure-port", 6443, "port to serve HTTPS on (0: any free port)")
	f.StringVar(&o.AdvertiseAddress, "advertise-address", "", "IP address clients reach this server on; added to the serving certificate")
	f.StringSliceVar(&o.EtcdServers, "etcd-servers", nil, "external etcd members (comma-separated URLs); empty runs an embedded etcd")
	f.StringSliceVar(&o.EtcdServersOverrides, "etcd-servers-overrides", nil, `per-resource etcd clusters, as kube-apiserver's: comma-separated group/resource#servers, servers semicolon-separated URLs; the resource (custom resources too) is stored, watched and compacted there, e.g. "/events#http://etcd6:2379,apps/deployments#http://etcd4:2379;http://etcd5:2379"`)
	f.StringVar(&o.EtcdCertFile, "etcd-certfile", "", "client certificate for the external etcd")
	f.StringVar(&o.EtcdKeyFile, "etcd-keyfile", "", "client key for the external etcd")
	f.StringVar(&o.EtcdCAFile, "etcd-cafile", "", "CA that verifies the external etcd members")
	f.DurationVar(&o.CompactionInterval, "etcd-compaction-interval", 5*time.Minute, "how often etcd history is compacted (0 disables)")
	f.IntVar(&o.WatchCacheSize, "watch-cache-size", 1000, "recent events kept per resource for watches to resume from, at least")
	f.IntVar(&o.WatchCacheMaxSize, "watch-cache-max-size", 100*1024, "most recent events kept per resource: the buffer grows toward it while its events are younger than 75 s (as kube-apiserver's watch cache); equal to --watch-cache-size for a fixed size")
	f.StringVar(&o.TokenAuthFile, "token-auth-file", "", "static bearer tokens, CSV lines token,user,uid,\"group1,group2\"")
	f.StringVar(&o.ServiceAccountIssuer, "service-account-issuer", "", "issuer (and default audience) of service-account tokens (default https://kubernetes.default.svc)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	addAdmissionAuditFlags(f, &o.AdmissionAuditOptions)
	addLifecycleFlags(f, &o.LifecycleOptions)
	addSchedulerFlags(f, &o.SchedulerOptions)
	addSimNodeFlags(f, &o.SimNodeOptions)
	addWorkloadControllerFlags(f, &o.WorkloadControllerOptions)
	addClusterControllerFlags(f, &o.ClusterControllerOptions)
	addAgentServerFlags(f, &o.AgentOptions)
	addClusterDNSFlags(f, &o.ClusterDNSOptions)
	addDataServicesFlags(f, &o.DataServicesOptions)
	// --- Services (internal/servicealloc) ---
	f.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", servicealloc.DefaultServiceClusterIPRange, "CIDR Service cluster IPs are allocated from, or an IPv4 and an IPv6 CIDR (comma-separated) for dual-stack; its first address is the kubernetes Service's")
	f.IntVar(&o.MaxRequestsInFlight, "max-requests-inflight", 400, "with API priority and fairness, this plus --max-mutating-requests-inflight is the server's total concurrency limit (the sum must be positive); without it, the limit of non-mutating requests in flight (0: no limit)")
	f.IntVar(&o.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", 200, "with API priority and fairness, this plus --max-requests-inflight is the server's total concurrency limit; without it, the limit of mutating requests in flight (0: no limit)")
	f.Var(invertedBool{&o.DisablePriorityAndFairness}, "enable-priority-and-fairness", "classify and queue requests by FlowSchemas and PriorityLevelConfigurations (API priority and fairness) instead of the two in-flight limits")
	f.Lookup("enable-priority-and-fairness").NoOptDefVal = "true"
	f.StringVar(&o.ServiceNodePortRange, "service-node-port-range", servicealloc.DefaultServiceNodePortRange, "port range (inclusive) NodePort and LoadBalancer Services get node ports from")
	// --- end Services ---
	f.StringSliceVar(&o.KubeletPreferredAddressTypes, "kubelet-preferred-address-types", []string{"InternalIP", "ExternalIP", "Hostname"}, "node address types tried, in order, to reach node agents (logs, exec, port-forward, proxy); kubeadm's order")
	f.StringVar(&o.KubeletCertificateAuthority, "kubelet-certificate-authority", "", "CA file node agents' serving certificates must chain to (empty: not verified, as kube-apiserver)")
	f.DurationVar(&o.ClusterSigningDuration, "cluster-signing-duration", 365*24*time.Hour, "longest lifetime of certificates signed for approved CertificateSigningRequests")
	f.BoolVar(&allowPrivileged, "allow-privileged", true, "allow privileged containers (kube-apiserver's default is false; kubeadm, kind and k3s set true); PodSecurity admission refuses them per namespace")
	return cmd
}

func newEtcdCommand(out, errOut io.Writer) *cobra.Command {
	var o etcd.MemberOptions
	var clientURLs, peerURLs string
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one etcd member, e.g. one of a three-member cluster that several kube servers share",
		Example: `  kube etcd --name e1 --data-dir /tmp/e1 --listen-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --initial-cluster e1=http://127.0.0.1:2380,e2=http://127.0.0.1:2382,e3=http://127.0.0.1:2384`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.DataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			o.ClientURLs = splitList(clientURLs)
			o.PeerURLs = splitList(peerURLs)
			ctx, stop := signalContext()
			defer stop()
			m, err := etcd.StartMember(ctx, o)
			if err != nil {
				return err
			}
			defer m.Close()
			fmt.Fprintf(out, "etcd member %s serving clients on %s\n", o.Name, strings.Join(m.ClientURLs(), ","))
			select {
			case <-ctx.Done():
				return nil
			case err := <-m.Err():
				return err
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "default", "member name, as in --initial-cluster")
	f.StringVar(&o.DataDir, "data-dir", "", "member data directory (required)")
	f.StringVar(&clientURLs, "listen-client-urls", "http://127.0.0.1:2379", "URLs to serve clients on")
	f.StringVar(&peerURLs, "listen-peer-urls", "http://127.0.0.1:2380", "URLs to serve peers on")
	f.StringVar(&o.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member (default: this member alone)")
	f.StringVar(&o.ClusterToken, "initial-cluster-token", "kube-etcd", "token that tells this cluster from others")
	f.StringVar(&o.LogLevel, "log-level", "error", "etcd log level")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
