package netharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/proxy"
	"kubeos.dev/kube/internal/agent/routes"
	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

// BusyboxImage is the image every pod of the harness runs (busybox-static, one symlink per
// applet, PATH=/bin), imported on both nodes; pull policy Never.
const BusyboxImage = "kube.local/busybox:1"

// Options choose what Run starts.
type Options struct {
	// Name is a short word naming the test package in logs (e.g. "svc", "dns").
	Name string
	// SecondNode starts node B: a `kube agent` process in its own network namespace.
	SecondNode bool
	// Server changes the server's options after the harness set its own (a package's own
	// component flags, e.g. o.AgentDNS).
	Server func(*server.Options)
	// AgentArgs are extra `kube agent` flags for node B (e.g. "--dns=false").
	AgentArgs []string
}

// Node is one node of the cluster.
type Node struct {
	// Name is the Node's name; IP its InternalIP (NodePorts answer there).
	Name, IP string
	// PodCIDR is the node's pod CIDR (from node IPAM); Bridge its pod bridge.
	PodCIDR, Bridge string
	// Netns is the network namespace's name (node B), "" for the host (node A).
	Netns string
	// Table is the node's nftables table (Service proxy), in the node's namespace.
	Table string
}

// Command is name args run in the node's network namespace (nsenter --net for node B; the
// host's for node A), e.g. to probe a ClusterIP from that node.
func (n Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if n.Netns == "" {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=/var/run/netns/" + n.Netns, "--", name}, args...)...)
}

// Cluster is what Run started.
type Cluster struct {
	// Server is the in-process server (with node A's agent).
	Server *servertest.Server
	// Dir is the package's scratch directory (removed at the end).
	Dir string
	// ImageDir holds busybox.tar (both agents import it).
	ImageDir string
	// ClusterCIDR and ServiceCIDR are the cluster's pod and Service ranges.
	ClusterCIDR, ServiceCIDR string
	// A is the in-process agent's node (host network namespace); B the second one (zero
	// Node without Options.SecondNode).
	A, B Node
	// KubeBin is the kube binary node B runs (built once).
	KubeBin string

	opts      Options
	n         int
	stopPR    chan struct{}
	prWG      sync.WaitGroup
	agentB    *agentProcess
	forward   []byte
	serverLog *os.File
	keep      bool
}

// Run starts the cluster, sets *c, runs the package's tests and removes everything; its
// result is the exit code for os.Exit. The server's and agents' logs are kept in
// $TMPDIR/kube-netharness-<name>-<pid>/ when a test failed, and their path printed.
func Run(m *testing.M, o Options, c **Cluster) int {
	cl, err := start(o)
	if cl != nil {
		defer cl.stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netharness:", err)
		if cl != nil {
			// CI keeps only the test's output: the logs' last lines say why.
			cl.printLogTails(os.Stderr)
			cl.keepLogs()
		}
		return 1
	}
	*c = cl
	code := m.Run()
	if code != 0 {
		cl.keepLogs()
	}
	return code
}

func start(o Options) (*Cluster, error) {
	pid := os.Getpid()
	n, err := slot.N()
	if err != nil {
		return nil, err
	}
	dir, err := servertest.TempDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, n: n, Dir: dir, ImageDir: filepath.Join(dir, "images"),
		ClusterCIDR: fmt.Sprintf("10.236.%d.0/23", 2*n),
		ServiceCIDR: fmt.Sprintf("10.237.%d.0/23", 2*n),
		A:           Node{Name: fmt.Sprintf("nh%d-a", pid), Bridge: fmt.Sprintf("nh%da", pid), Table: fmt.Sprintf("kt%d", pid)},
	}
	c.forward, _ = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return c, err
	}
	if err := writeBusybox(filepath.Join(c.ImageDir, "busybox.tar")); err != nil {
		return c, fmt.Errorf("busybox image: %w", err)
	}
	if err := os.MkdirAll(c.logDir(), 0o755); err != nil {
		return c, err
	}
	c.serverLog, err = os.Create(filepath.Join(c.logDir(), "server.log"))
	if err != nil {
		return c, err
	}
	if o.SecondNode {
		if err := c.buildKube(); err != nil {
			return c, err
		}
		// Before the server: it listens on the veth's host address too.
		if err := c.setupNetns(); err != nil {
			return c, err
		}
	}
	started := time.Now()
	c.Server, err = servertest.StartWith(filepath.Join(dir, "server"), c.serverLog, func(so *server.Options) {
		if o.SecondNode {
			so.BindAddress = "0.0.0.0"
		}
		so.Agent = true
		so.AgentNodeName = c.A.Name
		so.AgentDataDir = filepath.Join(dir, "agent-a")
		so.AgentPort = 0
		so.AgentBridge = c.A.Bridge
		so.AgentImageDir = c.ImageDir
		so.AgentContainerdProxy = "http://127.0.0.1:9"
		so.AgentResolvConf = filepath.Join(dir, "resolv.conf")
		so.AgentCgroupRoot = servertest.AgentCgroupRoot()
		so.ClusterCIDR = c.ClusterCIDR
		so.NodeCIDRMaskSize = 24
		so.ServiceClusterIPRange = c.ServiceCIDR
		so.AgentServices = agent.ServicesOptions{Enabled: true, Table: c.A.Table, NodeRoutes: true}
		if o.Server != nil {
			o.Server(so)
		}
	})
	if err != nil {
		c.Server = nil
		return c, fmt.Errorf("start kube server: %w", err)
	}
	cs, err := c.clientset()
	if err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := grantNodeReads(ctx, cs); err != nil {
		return c, err
	}
	na, err := waitNode(ctx, cs, c.A.Name)
	if err != nil {
		return c, err
	}
	fmt.Fprintf(os.Stderr, "netharness: node %s Ready %.1f s after the server started\n", c.A.Name, time.Since(started).Seconds())
	c.A.PodCIDR, c.A.IP = na.Spec.PodCIDR, internalIP(na)
	if o.SecondNode {
		if err := c.startNodeB(ctx, cs); err != nil {
			return c, err
		}
	}
	c.stopPR = make(chan struct{})
	c.prWG.Add(1)
	go c.podRoutes(c.stopPR, &c.prWG)
	return c, nil
}

// stop removes everything start made, in reverse.
func (c *Cluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if c.stopPR != nil {
		close(c.stopPR)
		c.prWG.Wait()
	}
	if c.agentB != nil {
		c.stopNodeB()
	}
	if c.Server != nil {
		_ = c.Server.Stop()
		RemoveSandboxes(filepath.Join(c.Dir, "agent-a"), "")
	}
	unmountUnder(c.Dir)
	if err := servertest.RemoveAgentCgroupRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "netharness: cgroups left:", err)
	}
	agent.Cleanup(ctx, c.A.Bridge, c.ClusterCIDR)
	proxy.Cleanup(ctx, c.A.Table, c.ServiceCIDR)
	_ = routes.Cleanup(nil, c.ClusterCIDR)
	if c.opts.SecondNode {
		c.teardownNetns()
	}
	if c.forward != nil {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", c.forward, 0o644)
	}
	if c.serverLog != nil {
		c.serverLog.Close()
	}
	os.RemoveAll(c.Dir)
	if !c.keep {
		os.RemoveAll(c.logDir())
	}
}

func (c *Cluster) logDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("kube-netharness-%s-%d", c.opts.Name, os.Getpid()))
}

// printLogTails writes the last lines of the server's and node B's logs.
func (c *Cluster) printLogTails(w io.Writer) {
	for _, f := range []struct {
		name  string
		lines int
	}{{"server.log", 40}, {"agent-b.log", 80}} {
		b, err := os.ReadFile(filepath.Join(c.logDir(), f.name))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > f.lines {
			lines = lines[len(lines)-f.lines:]
		}
		fmt.Fprintf(w, "--- last %d lines of %s\n%s\n", len(lines), f.name, strings.Join(lines, "\n"))
	}
}

func (c *Cluster) keepLogs() {
	c.keep = true
	fmt.Fprintln(os.Stderr, "netharness: server and agent logs in", c.logDir())
}

// Config is an admin client configuration.
func (c *Cluster) Config(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := c.Server.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Clientset is an admin clientset.
func (c *Cluster) Clientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := c.clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (c *Cluster) clientset() (*kubernetes.Clientset, error) {
	cfg, err := c.Server.Config()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Nodes are the cluster's nodes: A, and B when started.
func (c *Cluster) Nodes() []Node {
	if c.opts.SecondNode {
		return []Node{c.A, c.B}
	}
	return []Node{c.A}
}

func waitNode(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, error) {
	return waitNodeOf(ctx, cs, name, nil)
}

// waitNodeOf waits for the node to be Ready with a pod CIDR; it gives up early when exited
// (its agent process's) is closed.
func waitNodeOf(ctx context.Context, cs kubernetes.Interface, name string, exited <-chan struct{}) (*corev1.Node, error) {
	var last error
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if n.Spec.PodCIDR != "" && nodeReady(n) {
				return n, nil
			}
			err = fmt.Errorf("node %s: podCIDR %q, conditions %v", name, n.Spec.PodCIDR, n.Status.Conditions)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("node %s not Ready with a pod CIDR", name), last)
		case <-exited:
			return nil, errors.Join(fmt.Errorf("node %s: its agent exited before the node was Ready", name), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// grantNodeReads lets the networking group list and watch Nodes (the agents' routes to
// other nodes' pod CIDRs need every Node; the Node authorizer lets a node read only its
// own). A stand-in until internal/rbac's kube:node-networking role has the rule itself.
func grantNodeReads(ctx context.Context, cs kubernetes.Interface) error {
	const name = "netharness:node-networking-nodes"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node reads role: %w", err)
	}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: rbac.NodeNetworkingGroup}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node reads binding: %w", err)
	}
	return nil
}
