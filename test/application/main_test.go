// Package application is issue 20's "Done when" end to end: one in-process
// `kube server --agent` running real pods (its own containerd, bridge kapp<pid>, pod CIDR
// 10.243.<pid%250>.0/24, busybox imported from a directory under two tags), the gateway on
// free high ports, the real PostgreSQL and redis-server (Debian's packages, started on free
// ports and registered as the default server entries). A tenant's user, with kubectl 1.33,
// applies the Application shop: Component web (busybox httpd) using Database orders
// (Retain), Cache sessions and Volume files, Route shop on shop.localtest; everything goes
// Active in dependency order, the pod sees the Database's connection and writes on the
// Volume, the gateway answers v1; a Canary Release 20 % → pause → `kubectl kube promote` →
// 100 % shows in the traffic counts; a revision to an image that does not exist rolls back
// by itself; deleting the Application removes Components, Routes and Releases and keeps the
// Database, saying so.
//
// Everything machine-wide is unique to this package's process and removed when it ends,
// pass or fail: sandboxes, containerd, the bridge, routes, mounts, the database servers.
package application

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

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/images"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/dataservices/servers/testservers"
	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/test/netharness"
)

// The two tags of the same busybox image (the version the page says comes from the
// Component's environment, which the Release changes with the image).
const (
	imageV1 = "kube.local/busybox:1"
	imageV2 = "kube.local/busybox:2"
)

// The tenant, its user and namespace.
const (
	tenant = "shop-team"
	user   = "carol"
	ns     = "shop-team-dev"
)

var (
	srv        *servertest.Server
	admin      client.WithWatch
	kubectlBin string
	kubeconfig string // the tenant user's
	dataDir    string
	agentDir   string
	httpAddr   string // the gateway's HTTP address
	logPath    string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	code = 1
	main := &testservers.Main{}
	defer main.Close()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(os.Stderr, "application:", r)
			code = 1
		}
	}()
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dataDir = dir
	defer os.RemoveAll(dir)
	pg := testservers.StartPostgres(main)
	rd := testservers.StartRedis(main)

	if kubectlBin, err = servertest.FindKubectl("1.33"); err != nil {
		fmt.Fprintln(os.Stderr, "application:", err)
		return 1
	}
	// kubectl finds the plugin on PATH: kubectl-kube is the kube binary under that name.
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := kubePlugin(filepath.Join(binDir, "kubectl-kube")); err != nil {
		fmt.Fprintln(os.Stderr, "application: kube binary:", err)
		return 1
	}
	os.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	hp, err1 := freePort()
	sp, err2 := freePort()
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "free ports:", err1, err2)
		return 1
	}
	bridge := fmt.Sprintf("kapp%d", os.Getpid())
	podCIDR := fmt.Sprintf("10.243.%d.0/24", slot.Must())
	agentDir = filepath.Join(dir, "agent")
	imageDir := filepath.Join(dir, "images")
	forward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	defer os.WriteFile("/proc/sys/net/ipv4/ip_forward", forward, 0o644)
	defer agent.Cleanup(context.Background(), bridge, podCIDR)
	defer servertest.RemoveAgentCgroupRoot()
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i, ref := range []string{imageV1, imageV2} {
		if err := writeBusybox(filepath.Join(imageDir, fmt.Sprintf("busybox%d.tar", i+1)), ref); err != nil {
			fmt.Fprintln(os.Stderr, "busybox image:", err)
			return 1
		}
	}
	logPath = filepath.Join(os.TempDir(), fmt.Sprintf("kube-application-test-%d.log", os.Getpid()))
	logf, _ := os.Create(logPath)
	defer func() {
		logf.Close()
		if code == 0 {
			os.Remove(logPath)
		} else {
			fmt.Fprintln(os.Stderr, "server and agent log:", logPath)
		}
	}()
	ready := make(chan struct{})
	srv, err = servertest.StartWith(filepath.Join(dir, "server"), logf, func(o *server.Options) {
		o.Agent = true
		o.AgentNodeName = fmt.Sprintf("app-t%d", os.Getpid())
		o.AgentDataDir = agentDir
		o.AgentPort = 0
		o.AgentBridge = bridge
		o.AgentImageDir = imageDir
		o.AgentContainerdProxy = "http://127.0.0.1:9" // pulls fail fast: nothing leaves the machine
		o.AgentResolvConf = filepath.Join(dir, "resolv.conf")
		o.AgentCgroupRoot = servertest.AgentCgroupRoot()
		o.ClusterCIDR = podCIDR
		o.NodeCIDRMaskSize = 24
		o.AgentGateway = agent.GatewayOptions{Enabled: true, Address: "127.0.0.1", HTTPPort: hp, HTTPSPort: sp, AccessLog: true, AccessLogWriter: logf,
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
	defer func() {
		srv.Stop()
		netharness.RemoveSandboxes(agentDir, "")
		unmountUnder(dir)
	}()
	httpAddr = fmt.Sprintf("127.0.0.1:%d", hp)
	if err := setup(pg.URL, rd.URL); err != nil {
		fmt.Fprintln(os.Stderr, "application: setup:", err)
		return 1
	}
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "the gateway did not start within 2 minutes")
		return 1
	}
	return m.Run()
}

// setup makes the admin client, registers the database servers, grants the gateway's
// reads, creates the Tenant and its user's kubeconfig.
func setup(pgURL, redisURL string) error {
	cfg, err := srv.Config()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	if admin, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ctx := context.Background()
	for name, e := range map[string][2]string{"pg-main": {servers.PostgreSQL, pgURL}, "redis-main": {servers.Redis, redisURL}} {
		s := &corev1.Secret{Type: servers.SecretType, Data: map[string][]byte{servers.KeyURL: []byte(e[1])}}
		s.Namespace, s.Name = servers.Namespace, name
		s.Labels = map[string]string{servers.LabelKind: e[0]}
		s.Annotations = map[string]string{servers.AnnotationDefault: "true"}
		if err := admin.Create(ctx, s); err != nil {
			return fmt.Errorf("register %s: %w", name, err)
		}
	}
	if err := grantGatewayReads(ctx); err != nil {
		return fmt.Errorf("gateway RBAC: %w", err)
	}
	t := &v1alpha1.Tenant{}
	t.Name = tenant
	t.Spec.Environments = []string{"dev"}
	t.Spec.Admins = []v1alpha1.Subject{{Kind: "User", Name: user}}
	if err := admin.Create(ctx, t); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	ucfg, err := srv.Inner().LoopbackConfig(user)
	if err != nil {
		return err
	}
	if kubeconfig, err = writeKubeconfig(ucfg, filepath.Join(dataDir, user+".kubeconfig")); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, res := range []string{"components.kubeos.dev", "releases.kubeos.dev", "databases.kubeos.dev"} {
		for {
			out, _, err := servertest.RunKubectl(kubectlBin, dataDir, kubeconfig, "", "auth", "can-i", "create", res, "-n", ns)
			if err == nil && strings.TrimSpace(out) == "yes" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s cannot create %s in %s: %q %v", user, res, ns, out, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// grantGatewayReads gives the networking group what the gateway reads beyond
// kube:node-networking (Routes, Releases, TLS Secrets): the bootstrap role lacks it
// (test/gateway does the same; reported to the lead).
func grantGatewayReads(ctx context.Context) error {
	role := &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeos.dev"}, Resources: []string{"routes", "releases"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
	}}
	role.Name = "test:application-gateway-read"
	if err := admin.Create(ctx, role); err != nil {
		return err
	}
	b := &rbacv1.ClusterRoleBinding{
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: rbac.NodeNetworkingGroup}}}
	b.Name = role.Name
	return admin.Create(ctx, b)
}

func writeKubeconfig(cfg *rest.Config, path string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "user", Namespace: ns}
	kc.CurrentContext = "kube"
	return path, clientcmd.WriteToFile(*kc, path)
}

// writeBusybox writes an OCI archive named ref of busybox-static with one symlink per applet.
func writeBusybox(path, ref string) error {
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
		{Path: "www", Mode: fs.ModeDir | 0o755},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			files = append(files, images.File{Path: "bin/" + a, Mode: fs.ModeSymlink | 0o777, Link: "busybox"})
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return images.WriteOCIFile(path, ref, "amd64", images.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}}, files)
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

// kubePlugin puts the kube binary at path: servertest's cached one, or (when the sources
// changed between its two go runs, as they do while others edit the checkout) one built
// here.
func kubePlugin(path string) error {
	bin, err := servertest.KubeBinary()
	if err == nil {
		return os.Symlink(bin, path)
	}
	fmt.Fprintln(os.Stderr, "application: servertest.KubeBinary:", err, "- building it")
	if out, err := exec.Command("go", "build", "-o", path, "kubeos.dev/kube/cmd/kube").CombinedOutput(); err != nil {
		return fmt.Errorf("go build kubeos.dev/kube/cmd/kube: %v\n%s", err, out)
	}
	return nil
}

// freePort is a port of the process's test slot: not in the ephemeral range, where another
// connection may take it before the gateway binds it.
func freePort() (int, error) { return slot.FreePort() }
