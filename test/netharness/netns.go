package netharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	agentruntime "kubeos.dev/kube/internal/agent/runtime"
	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (c *Cluster) vethHost() string { return fmt.Sprintf("nh%dh", os.Getpid()) }
func (c *Cluster) vethNS() string   { return fmt.Sprintf("nh%dn", os.Getpid()) }

// HostVethIP is the host's address on the veth to node B (the server listens there).
func (c *Cluster) HostVethIP() string { return fmt.Sprintf("10.238.%d.1", c.n) }

// setupNetns makes node B's namespace and the veth pair, addressed and up, with a default
// route to the host, and forwarding on both sides.
func (c *Cluster) setupNetns() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid := os.Getpid()
	c.B = Node{Name: fmt.Sprintf("nh%d-b", pid), Bridge: fmt.Sprintf("nh%db", pid), Netns: fmt.Sprintf("nh%d", pid),
		Table: fmt.Sprintf("kt%d", pid), IP: fmt.Sprintf("10.238.%d.2", c.n)}
	ns := c.B.Netns
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", c.vethHost(), "type", "veth", "peer", "name", c.vethNS()},
		{"ip", "link", "set", c.vethNS(), "netns", ns},
		{"ip", "addr", "add", c.HostVethIP() + "/30", "dev", c.vethHost()},
		{"ip", "link", "set", c.vethHost(), "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", c.B.IP + "/30", "dev", c.vethNS()},
		{"ip", "-n", ns, "link", "set", c.vethNS(), "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", c.HostVethIP()},
		{"nsenter", "--net=/var/run/netns/" + ns, "--", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
}

func (c *Cluster) teardownNetns() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = run(ctx, "ip", "netns", "del", c.B.Netns)
	_ = run(ctx, "ip", "link", "del", c.vethHost())
}

// agentProcess is node B's `kube agent`, in node B's namespace.
type agentProcess struct {
	args    []string
	cmd     *exec.Cmd
	dataDir string
	log     *os.File
	// exited is closed when cmd has exited; err is then its Wait error.
	exited chan struct{}
	err    error
}

// buildKube finds the kube binary node B runs: servertest's (linked once per machine and
// cached by the go command), or, when that fails (the sources changed between its two go
// runs), one built here — a cold build takes minutes on a loaded machine: 20 at most.
func (c *Cluster) buildKube() error {
	bin, err := servertest.KubeBinary()
	if err == nil {
		c.KubeBin = bin
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c.KubeBin = filepath.Join(c.Dir, "kube")
	build := exec.CommandContext(ctx, "go", "build", "-o", c.KubeBin, "kubeos.dev/kube/cmd/kube")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) startNodeB(ctx context.Context, cs kubernetes.Interface) error {
	kc, err := c.nodeKubeconfig(c.B.Name)
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(c.logDir(), "agent-b.log"))
	if err != nil {
		return err
	}
	data := filepath.Join(c.Dir, "agent-b")
	args := []string{"nsenter", "--net=/var/run/netns/" + c.B.Netns, "--", c.KubeBin, "agent",
		"--kubeconfig", kc, "--data-dir", data, "--node-name", c.B.Name, "--port", "0", "--node-ip", c.B.IP,
		"--cluster-cidr", c.ClusterCIDR, "--service-cidr", c.ServiceCIDR, "--bridge", c.B.Bridge,
		"--containerd-proxy", "http://127.0.0.1:9", "--image-dir", c.ImageDir,
		"--resolv-conf", filepath.Join(c.Dir, "resolv.conf"), "--services-table", c.B.Table,
		// Memory only, as the in-process agent (server.InProcessEvictionHard): the kubelet's
		// disk thresholds (imagefs.available<15%) evict every pod of a test on a machine whose
		// shared disk is fuller than that.
		"--eviction-hard", server.InProcessEvictionHard, "--cgroup-root", servertest.NodeCgroupRoot("b")}
	c.agentB = &agentProcess{args: append(args, c.opts.AgentArgs...), dataDir: data, log: logf}
	started := time.Now()
	if err := c.agentB.start(); err != nil {
		return err
	}
	// Node B's own deadline, from its start: on a loaded machine node A may have used most
	// of the harness's.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	nb, err := waitNodeOf(ctx, cs, c.B.Name, c.agentB.exited)
	if err != nil {
		if c.agentB.hasExited() {
			err = fmt.Errorf("%w (kube agent exited: %v)", err, c.agentB.err)
		}
		return err
	}
	c.B.PodCIDR = nb.Spec.PodCIDR
	fmt.Fprintf(os.Stderr, "netharness: node %s Ready %.1f s after its agent started\n", c.B.Name, time.Since(started).Seconds())
	// Each node's pods are routed to the other's by the agents themselves
	// (internal/agent/routes); the harness adds no route.
	return nil
}

// nodeKubeconfig writes a kubeconfig of system:node:<node> that reaches the server at the
// veth's host address (its certificate names 127.0.0.1, so that is the TLS server name).
func (c *Cluster) nodeKubeconfig(node string) (string, error) {
	cfg, err := c.Server.Inner().LoopbackConfig("system:node:"+node, "system:nodes", rbac.NodeNetworkingGroup)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://%s:%d", c.HostVethIP(), c.Server.Port),
		CertificateAuthorityData: cfg.CAData, TLSServerName: "127.0.0.1"}
	kc.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["node"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "node"}
	kc.CurrentContext = "node"
	path := filepath.Join(c.Dir, node+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// CleanupNodeB stops node B's agent (SIGKILL; its pods stay) and runs `kube agent
// --cleanup` in node B's namespace with the networking flags node B runs with; its output
// and error. StartAgentB starts the agent again.
func (c *Cluster) CleanupNodeB(ctx context.Context) (string, error) {
	c.agentB.kill9()
	args := []string{"--net=/var/run/netns/" + c.B.Netns, "--", c.KubeBin, "agent", "--cleanup",
		"--cluster-cidr", c.ClusterCIDR, "--service-cidr", c.ServiceCIDR, "--services-table", c.B.Table}
	args = append(args, c.opts.AgentArgs...)
	out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
	return string(out), err
}

func (a *agentProcess) start() error {
	a.cmd = exec.Command(a.args[0], a.args[1:]...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		return err
	}
	exited, cmd := make(chan struct{}), a.cmd
	a.exited = exited
	go func() {
		a.err = cmd.Wait()
		close(exited)
	}()
	return nil
}

func (a *agentProcess) hasExited() bool {
	select {
	case <-a.exited:
		return true
	default:
		return false
	}
}

func (a *agentProcess) kill9() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Kill()
	<-a.exited
	a.cmd = nil
}

// KillAgentB kills node B's agent with SIGKILL (its containerd, pods and kernel rules stay).
func (c *Cluster) KillAgentB() { c.agentB.kill9() }

// StartAgentB starts node B's agent again after KillAgentB, with the same flags.
func (c *Cluster) StartAgentB() error { return c.agentB.start() }

func (c *Cluster) stopNodeB() {
	c.agentB.kill9()
	RemoveSandboxes(c.agentB.dataDir, c.B.Netns)
	if b, err := os.ReadFile(agentruntime.Layout{Dir: filepath.Join(c.agentB.dataDir, "containerd")}.PidFile()); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	unmountUnder(c.agentB.dataDir)
	c.agentB.log.Close()
}
