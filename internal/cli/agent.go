package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/eviction"
	"kubeos.dev/kube/internal/agent/images"
	agentruntime "kubeos.dev/kube/internal/agent/runtime"
)

// agentCommands are the top-level commands of the agent area: `kube agent` and
// `kube images`.
func agentCommands(out, errOut io.Writer) []*cobra.Command {
	return []*cobra.Command{newAgentCommand(out, errOut), newImagesCommand(out), newTokenCommand(out)}
}

func defaultAgentDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/kube-agent"
	}
	return filepath.Join(filepath.Dir(defaultDataDirOrTmp()), "kube-agent")
}

func defaultDataDirOrTmp() string {
	d, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "kube")
	}
	return filepath.Join(d, ".local", "share", "kube")
}

// agentGCPercent is `kube agent`'s GOGC unless the GOGC environment variable sets one. A
// node agent's live heap is small (informer caches of its own pods, pod workers) and its
// garbage comes from periodic syncs, so the default 100 doubles its heap for little CPU:
// at 110 idle pods, 50 took the anonymous RSS from 40 to 31 MB for the same idle CPU within
// noise (bench/README.md, "Node agent").
const agentGCPercent = 50

func newAgentCommand(out, errOut io.Writer) *cobra.Command {
	var o agent.Options
	var kubeconfig, logLevel, serverURL, token, caFile string
	var cleanup, rotate bool
	cgroupsPerQOS := true
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent: register a Node and run the pods bound to it through CRI (containerd)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(errOut, logLevel)
			if err != nil {
				return err
			}
			o.Log = log
			o.NoCgroupsPerQOS = !cgroupsPerQOS
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(agentGCPercent)
			}
			if cleanup {
				return runAgentCleanup(cmd.Context(), out, o)
			}
			if abs, err := filepath.Abs(o.DataDir); err == nil {
				o.DataDir = abs
			}
			switch {
			case kubeconfig != "" && token != "":
				return fmt.Errorf("--kubeconfig and --token exclude each other")
			case token != "":
				if o.NodeName == "" {
					h, _ := os.Hostname()
					o.NodeName = strings.ToLower(h)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				kc, err := agent.Bootstrap(ctx, agent.BootstrapOptions{DataDir: o.DataDir, Server: serverURL, Token: token, CAFile: caFile, NodeName: o.NodeName})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "Node identity system:node:%s bootstrapped: %s\n", o.NodeName, kc)
				kubeconfig = kc
			case kubeconfig == "":
				return fmt.Errorf("--kubeconfig, or --server and --token, are required")
			}
			ctx, stop := signalContext()
			defer stop()
			var cfg *rest.Config
			if token != "" && rotate {
				cfg, err = agent.RotatingConfig(ctx, o.DataDir, o.NodeName, log)
				// The rotating transport holds the TLS settings: the API's callers are
				// verified against the cluster CA given for the bootstrap.
				if o.ClientCAFile == "" {
					o.ClientCAFile = caFile
				}
			} else {
				cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			}
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			cfg.QPS, cfg.Burst = 50, 100
			o.Config = cfg
			if o.Services.LoopbackAPIServer == "" {
				// A server reached on loopback (this host's, on its default bind) is not
				// reachable at the address the kubernetes Service lists.
				o.Services.LoopbackAPIServer = agent.LoopbackAPIServer(cfg.Host)
			}
			a, err := agent.New(o)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Node agent %s, data directory %s\n", o.NodeName, o.DataDir)
			return a.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the node's identity (system:node:<name> in system:nodes)")
	f.StringVar(&serverURL, "server", "", "API server URL, to bootstrap the node's identity with --token")
	f.StringVar(&token, "token", "", "bootstrap token (kube token create): the agent requests its node client certificate with it")
	f.StringVar(&caFile, "certificate-authority", "", "CA file of the API server's certificate (with --token)")
	f.StringVar(&o.DataDir, "data-dir", defaultAgentDataDir(), "directory for the agent's containerd, pod volumes, logs and certificates")
	f.StringVar(&o.NodeName, "node-name", "", "the Node's name (default: the hostname)")
	f.IntVar(&o.Port, "port", 10250, "HTTPS port of the agent's API (logs, exec, attach, port-forward; 0: any free port)")
	f.StringVar(&o.Address, "address", "0.0.0.0", "IP address of the agent's API")
	f.StringVar(&o.NodeIP, "node-ip", "", "the Node's InternalIP (default: the default-route interface's IPv4)")
	f.StringVar(&o.PodCIDR, "pod-cidr", "", "pod CIDR when the server's node IPAM gives the Node none")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", "", "cluster pod CIDR, routed 'unreachable' so pod addresses never leave the machine (default: the pod CIDR)")
	f.StringVar(&o.Bridge, "bridge", "kube0", "name of the pods' Linux bridge")
	f.StringVar(&o.CNIBinDir, "cni-bin-dir", "/usr/lib/cni", "directory of the CNI plugins")
	f.StringVar(&o.ContainerRuntimeEndpoint, "container-runtime-endpoint", "", "an existing CRI endpoint (default: start and supervise the agent's own containerd)")
	f.StringVar(&o.ContainerdProxy, "containerd-proxy", "", "HTTP(S)_PROXY of the agent's own containerd (image pulls)")
	f.StringVar(&o.ImageDir, "image-dir", "", "directory of OCI or docker image archives (*.tar) imported at start")
	f.StringVar(&o.ClientCAFile, "client-ca-file", "", "CA verifying callers of the agent's API (default: the kubeconfig's CA)")
	f.StringSliceVar(&o.ClusterDNS, "cluster-dns", nil, "cluster DNS server addresses for ClusterFirst pods")
	f.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	f.StringVar(&o.ResolvConf, "resolv-conf", "/etc/resolv.conf", "resolv.conf of dnsPolicy Default pods")
	f.IntVar(&o.MaxPods, "max-pods", 110, "pods capacity of the node")
	f.StringVar(&o.ServiceCIDR, "service-cidr", "10.96.0.0/12", "the Service cluster IP range (the server's --service-cluster-ip-range), routed 'unreachable' on the node")
	addAgentServicesFlags(f, "", &o.Services)
	addAgentDNSFlags(f, "", &o.DNS)
	addAgentNetworkPolicyFlags(f, "", &o.NetworkPolicy)
	addAgentGatewayFlags(f, "", &o.Gateway)
	f.BoolVar(&rotate, "rotate-certificates", true, "renew the node's client certificate before it expires (with --token: the bootstrapped identity)")
	f.StringVar(&o.EvictionHard, "eviction-hard", eviction.DefaultHard, "hard eviction thresholds, signal<quantity or signal<percentage% (memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree); \"none\": no threshold")
	f.DurationVar(&o.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", 5*time.Minute, "how long a MemoryPressure or DiskPressure condition stays after its threshold is no longer met")
	f.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", 0, "on SIGTERM, stop the node's pods (lowest priority first) within this time before exiting; 0 leaves them running")
	f.DurationVar(&o.ShutdownGracePeriodCriticalPods, "shutdown-grace-period-critical-pods", 0, "the part of --shutdown-grace-period kept for critical pods (priority system-cluster-critical and above), stopped last")
	f.StringVar(&o.CgroupRoot, "cgroup-root", "/", "parent cgroup of the pods' kubepods hierarchy (kubepods/{burstable,besteffort}/pod<uid>)")
	f.BoolVar(&o.ReleaseStartupMemory, "release-startup-memory", true, "30 s after the start, drop the pages of the kube binary that only the start touched (the control plane's code and data) from the agent's resident set")
	f.BoolVar(&cgroupsPerQOS, "cgroups-per-qos", true, "give every pod its cgroup in the kubelet's QoS hierarchy; false leaves pod cgroups to the runtime")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&cleanup, "cleanup", false, "remove what the agent's networking put on this node (nftables tables, DNS link, routes; the same table/interface/CIDR flags as its run) and exit")
	return cmd
}

// runAgentCleanup is `kube agent --cleanup`: agent.CleanupNetworking with the flags' options.
func runAgentCleanup(ctx context.Context, out io.Writer, o agent.Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	done, err := agent.CleanupNetworking(ctx, o)
	for _, d := range done {
		fmt.Fprintln(out, "removed:", d)
	}
	return err
}

func newImagesCommand(out io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "Manage the images of a node agent's containerd"}
	var dataDir, socket string
	imp := &cobra.Command{
		Use:   "import FILE.tar...",
		Short: "Import OCI or docker image archives into the node agent's containerd (no registry needed)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if socket == "" {
				socket = agentruntime.Layout{Dir: filepath.Join(dataDir, "containerd")}.Socket()
			}
			for _, f := range args {
				if err := images.Import(context.Background(), socket, f); err != nil {
					return err
				}
				fmt.Fprintf(out, "imported %s\n", f)
			}
			return nil
		},
	}
	imp.Flags().StringVar(&dataDir, "data-dir", defaultAgentDataDir(), "the agent's data directory (its containerd's socket is there)")
	imp.Flags().StringVar(&socket, "address", "", "containerd socket (default: the agent's own)")
	cmd.AddCommand(imp)
	return cmd
}

func newTokenCommand(out io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage bootstrap tokens (node agents join with them)"}
	var kubeconfig, description string
	var ttl time.Duration
	var groups []string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a bootstrap token (a bootstrap.kubernetes.io/token Secret in kube-system) and print it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			for _, g := range groups {
				if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
					return err
				}
			}
			tok, err := bootstraputil.GenerateBootstrapToken()
			if err != nil {
				return err
			}
			s := BootstrapTokenSecret(tok, description, groups, ttl, time.Now())
			if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(cmd.Context(), s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("token secret: %w", err)
			}
			fmt.Fprintln(out, tok)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "admin kubeconfig (default $KUBECONFIG)")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid (0: forever)")
	f.StringVar(&description, "description", "", "what the token is for")
	f.StringSliceVar(&groups, "groups", []string{"system:bootstrappers:kube:default-node-token"}, "extra groups the token authenticates as (system:bootstrappers:...)")
	cmd.AddCommand(create)
	return cmd
}

// BootstrapTokenSecret is the Secret of bootstrap token tok ("id.secret"), upstream's
// format: usable for authentication and signing, expiring ttl after now (never when 0).
func BootstrapTokenSecret(tok, description string, groups []string, ttl time.Duration, now time.Time) *corev1.Secret {
	id, secret, _ := strings.Cut(tok, ".")
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(id),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
	}
	if description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(description)
	}
	if len(groups) > 0 {
		data[bootstrapapi.BootstrapTokenExtraGroupsKey] = []byte(strings.Join(groups, ","))
	}
	if ttl > 0 {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(now.Add(ttl).UTC().Format(time.RFC3339))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       data,
	}
}
