package ctl

// The streaming suite tests the connect subresources end to end as users meet them: real
// kubectl 1.27 (SPDY only) and 1.33 (WebSocket first) and client-go against its own in-process
// server on embedded etcd, whose Nodes point at an agent stub (internal/apiserver/proxy/
// agenttest) that trusts the server's CA — logs, logs -f, exec with and without stdin,
// port-forward, nodes/proxy, and a user refused exec.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/apiserver/proxy/agenttest"
	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server/servertest"
)

var streamingSrv *servertest.Server

var streamingSuite = servertest.NewFixture("streaming", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	streamingSrv, err = servertest.Start(dir, nil)
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() {
		streamingSrv.Stop()
		os.RemoveAll(dir)
	})
	return nil
})

func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := streamingSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// world is one node whose agent is a stub, and one scheduled pod "web" on it, in a
// namespace of the test's own.
type world struct {
	ns, node  string
	agent     *agenttest.Agent
	proxyable bool // the agent's address is one nodes/proxy accepts (not loopback)
}

// newWorld starts an agent stub trusted by the server (a serving certificate from the
// server's CA, client certificates verified against it) and creates its Node, a namespace
// and the pod web (container app, port 80) bound to the node with a pod IP.
func newWorld(t *testing.T, name string) *world {
	t.Helper()
	ctx := ctxT(t)
	host, proxyable := agenttest.GlobalUnicastIPv4()
	agentPKI := caCopy(t, host)
	agent := agenttest.Start(t, host, agentPKI)
	_, portStr, _ := net.SplitHostPort(agent.Addr)
	port, _ := strconv.Atoi(portStr)
	cs := clientset(t, adminConfig(t))
	w := &world{ns: name, node: name + "-node", agent: agent, proxyable: proxyable}

	// A node registers with its status, as a kubelet does (the node IPAM and TTL controllers
	// write the Node right after its create, so a later status update would race them).
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.node}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}, {Type: corev1.NodeHostName, Address: w.node}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Nodes().Delete(context.Background(), w.node, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{NodeName: w.node, Containers: []corev1.Container{{
			Name: "app", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
	var created *corev1.Pod
	// The namespace's default ServiceAccount, which admission wants, comes from a controller.
	servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		var err error
		created, err = cs.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	created.Status.PodIP, created.Status.PodIPs = host, []corev1.PodIP{{IP: host}}
	created.Status.Phase = corev1.PodRunning
	if _, err := cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return w
}

// caCopy is a PKI directory holding the server's CA and a serving certificate for host,
// as a node agent's would.
func caCopy(t *testing.T, host string) *pki.PKI {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pki.CACertName, pki.CAKeyName} {
		b, err := os.ReadFile(filepath.Join(streamingSrv.DataDir, "pki", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := pki.Ensure(pki.Options{Dir: dir, Hosts: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// streamingKubectl runs one kubectl binary with its own HOME, discovery cache and kubeconfig.
type streamingKubectl struct {
	t                      *testing.T
	version, bin, home, kc string
}

func newStreamingKubectl(t *testing.T, version, kubeconfig string) *streamingKubectl {
	t.Helper()
	bin, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	return &streamingKubectl{t: t, version: version, bin: bin, home: t.TempDir(), kc: kubeconfig}
}

func (k *streamingKubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + k.home, "KUBECONFIG=" + k.kc, "KUBECACHEDIR=" + filepath.Join(k.home, "cache")}
	return cmd
}

// run runs kubectl to its end and returns stdout and stderr apart.
func (k *streamingKubectl) run(stdin string, args ...string) (string, string, error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := k.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	k.t.Logf("$ kubectl.%s %s\n%s%s", k.version, strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), err
}

func (k *streamingKubectl) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, errOut, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl.%s %s: %v\n%s", k.version, strings.Join(args, " "), err, errOut)
	}
	return out
}

// start runs kubectl in the background and returns a reader of its stdout and what it
// writes on stderr; the process is killed when the test ends.
func (k *streamingKubectl) start(args ...string) (*bufio.Reader, *servertest.Buffer, *exec.Cmd) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := k.command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	stderr := &servertest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	return bufio.NewReader(out), stderr, cmd
}
