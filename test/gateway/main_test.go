// Package gateway tests the Route kind and the gateway as users meet them: one in-process
// `kube server --agent` whose agent runs the gateway on free high ports (HTTP and HTTPS),
// Routes written through the API, requests with a Host header (and SNI) to the gateway's
// ports. The backends are real busybox httpd pods of a Component (its status, a Release's
// canary split in traffic counts), or, for the routing logic, HTTP servers of this process
// on the host's address named by Services without selector and EndpointSlices the test
// writes (the gateway routes to endpoints, never through the Service proxy).
//
// Machine-wide state is unique to this package's process (bridge kube-g<pid>, pod CIDR
// 10.238.<pid%250>.0/24, free ports) and removed when the package ends.
package gateway

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/images"
	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
	kubeosclient "kubeos.dev/kube/pkg/client/clientset/versioned"
	"kubeos.dev/kube/test/netharness"
)

var (
	srv       *servertest.Server
	cs        kubernetes.Interface
	xc        kubeosclient.Interface
	httpAddr  string // the gateway's HTTP address (127.0.0.1:port)
	httpsAddr string
	hostIP    string // where the backends listen
	// metrics is the registry the agent's gateway registers its kube_gateway_* metrics in.
	metrics = prometheus.NewRegistry()
	// logPath is the server's and agent's log, the gateway's access log included.
	logPath string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	hostIP, err = outboundIP()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host address:", err)
		return 1
	}
	hp, err1 := freePort()
	sp, err2 := freePort()
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "free ports:", err1, err2)
		return 1
	}
	bridge := fmt.Sprintf("kube-g%d", os.Getpid())
	podCIDR := fmt.Sprintf("10.242.%d.0/24", slot.Must())
	forward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	defer os.WriteFile("/proc/sys/net/ipv4/ip_forward", forward, 0o644)
	defer agent.Cleanup(context.Background(), bridge, podCIDR)
	defer servertest.RemoveAgentCgroupRoot()
	logPath = filepath.Join(os.TempDir(), fmt.Sprintf("kube-gateway-test-%d.log", os.Getpid()))
	logf, _ := os.Create(logPath)
	code := 1
	defer func() {
		logf.Close()
		if code == 0 {
			os.Remove(logPath)
		} else {
			fmt.Fprintln(os.Stderr, "server and agent log:", logPath)
		}
	}()
	imageDir := filepath.Join(dir, "images")
	if err := writeBusybox(filepath.Join(imageDir, "busybox.tar")); err != nil {
		fmt.Fprintln(os.Stderr, "busybox image:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready := make(chan struct{})
	srv, err = servertest.StartWith(filepath.Join(dir, "server"), logf, func(o *server.Options) {
		o.Agent = true
		o.AgentNodeName = fmt.Sprintf("gw-t%d", os.Getpid())
		o.AgentDataDir = filepath.Join(dir, "agent")
		o.AgentPort = 0
		o.AgentBridge = bridge
		o.AgentContainerdProxy = "http://127.0.0.1:9"
		o.AgentImageDir = imageDir
		o.AgentResolvConf = filepath.Join(dir, "resolv.conf")
		o.AgentCgroupRoot = servertest.AgentCgroupRoot()
		o.ClusterCIDR = podCIDR
		o.NodeCIDRMaskSize = 24
		o.AgentGateway = agent.GatewayOptions{Enabled: true, Address: "127.0.0.1", HTTPPort: hp, HTTPSPort: sp, AccessLog: true, AccessLogWriter: logf, Registry: metrics,
			Ready: func(h, s net.Addr) {
				select {
				case <-ready:
				default:
					close(ready)
				}
			}}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		return 1
	}
	// Whatever the pods left goes once the server (and its agent) stopped, pass or fail.
	defer func() {
		srv.Stop()
		netharness.RemoveSandboxes(filepath.Join(dir, "agent"), "")
		unmountUnder(dir)
	}()
	httpAddr, httpsAddr = fmt.Sprintf("127.0.0.1:%d", hp), fmt.Sprintf("127.0.0.1:%d", sp)
	cfg, err := srv.Config()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cs, xc = kubernetes.NewForConfigOrDie(cfg), kubeosclient.NewForConfigOrDie(cfg)
	if err := grantGatewayReads(cs); err != nil {
		fmt.Fprintln(os.Stderr, "gateway RBAC:", err)
		return 1
	}
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "the gateway did not start within 2 minutes")
		return 1
	}
	code = m.Run()
	return code
}

// grantGatewayReads gives the networking group what the gateway reads beyond
// kube:node-networking (Routes, Releases, TLS Secrets): the rule the bootstrap role lacks.
func grantGatewayReads(cs kubernetes.Interface) error {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test:gateway-read"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeos.dev"}, Resources: []string{"routes", "releases"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
	}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test:gateway-read"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: rbac.NodeNetworkingGroup}}}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
	return err
}

// freePort is a port of the process's test slot: not in the ephemeral range, where another
// connection may take it before the gateway binds it.
func freePort() (int, error) { return slot.FreePort() }

// outboundIP is the host's address on its default route (EndpointSlices refuse loopback
// addresses, so the backends listen here).
func outboundIP() (string, error) {
	c, err := net.Dial("udp4", "192.0.2.1:9")
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

const busyboxImage = "kube.local/busybox:1"

// writeBusybox writes an OCI archive of the host's busybox-static with one symlink per
// applet (the machine has no registry; the agent imports it at start).
func writeBusybox(path string) error {
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return err
	}
	files := []images.File{
		{Path: "bin", Mode: fs.ModeDir | 0o755}, {Path: "bin/busybox", Mode: 0o755, Data: bin},
		{Path: "etc", Mode: fs.ModeDir | 0o755}, {Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\n")},
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			files = append(files, images.File{Path: "bin/" + a, Mode: fs.ModeSymlink | 0o777, Link: "busybox"})
		}
	}
	return images.WriteOCIFile(path, busyboxImage, "amd64", images.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}}, files)
}

// unmountUnder lazily unmounts whatever is still mounted below root.
func unmountUnder(root string) {
	b, _ := os.ReadFile("/proc/mounts")
	var mounts []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], root+"/") {
			mounts = append(mounts, f[1])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = exec.Command("umount", "-l", mounts[i]).Run()
	}
}
