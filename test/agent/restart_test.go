package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubeos.dev/kube/internal/agent"
	agentruntime "kubeos.dev/kube/internal/agent/runtime"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
	"kubeos.dev/kube/test/netharness"
)

// nodeKubeconfig writes a kubeconfig of system:node:<node> for the test server.
func nodeKubeconfig(t *testing.T, node string) string {
	t.Helper()
	cfg, err := srv.Inner().LoopbackConfig("system:node:"+node, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["node"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "node"}
	kc.CurrentContext = "node"
	path := filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentProcess is a `kube agent` process of its own node, data dir, containerd, bridge and
// pod CIDR, removed with everything it made when the test ends.
type agentProcess struct {
	t       *testing.T
	args    []string
	cmd     *exec.Cmd
	dataDir string
	log     *os.File
}

func startAgentProcess(t *testing.T, node string) *agentProcess {
	t.Helper()
	n := slot.Must()
	return startAgentProcessWith(t, node, fmt.Sprintf("10.235.%d.0/24", n), fmt.Sprintf("kube-u%d", os.Getpid()),
		[]string{"--kubeconfig", nodeKubeconfig(t, node)})
}

// startAgentProcessWith starts a `kube agent` of node with its own pod CIDR and bridge,
// its identity from auth (--kubeconfig, or --server and --token) and extra flags after it.
func startAgentProcessWith(t *testing.T, node, cidr, br string, auth []string, extra ...string) *agentProcess {
	t.Helper()
	bin := servertest.BuildKube(t, t.TempDir())
	data, err := os.MkdirTemp("", "kube-agent-b-")
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(data, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{bin, "agent"}, auth...)
	a := &agentProcess{t: t, dataDir: data, log: logf, args: append(append(args,
		"--data-dir", filepath.Join(data, "d"), "--node-name", node, "--port", "0", "--pod-cidr", cidr, "--cluster-cidr", cidr,
		"--bridge", br, "--containerd-proxy", "http://127.0.0.1:9", "--image-dir", imageDir,
		"--resolv-conf", filepath.Join(dir, "resolv.conf"), "--cgroup-root", servertest.NodeCgroupRoot(node),
		// Pods only: Service networking, DNS and NetworkPolicy are test/services-net's and test/netpol's
		// (it would program the host's nftables and links outside this package's names).
		"--services=false", "--dns=false", "--network-policy=false", "--node-routes=false", "--gateway=false",
		// Memory only, as the in-process agent: with the kubelet's disk thresholds a shared
		// machine under 15 % free disk evicts the tests' pods (extra may set its own).
		"--eviction-hard", "memory.available<100Mi"), extra...)}
	t.Cleanup(func() {
		// The agent goes first (SIGKILL: its containerd stays up), so that nothing makes
		// sandboxes while they are removed.
		if a.cmd != nil && a.cmd.Process != nil {
			a.kill9()
		}
		netharness.RemoveSandboxes(filepath.Join(data, "d"), "")
		if b, err := os.ReadFile(agentruntime.Layout{Dir: filepath.Join(data, "d", "containerd")}.PidFile()); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		unmountUnder(data)
		agent.Cleanup(context.Background(), br, cidr)
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("agent log:\n%s", b)
		}
		os.RemoveAll(data)
	})
	a.start()
	return a
}

func (a *agentProcess) start() {
	a.t.Helper()
	a.cmd = exec.Command(a.args[0], a.args[1:]...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agentProcess) kill9() {
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
	a.cmd = nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestKill9Adopts: SIGKILL of `kube agent` while a pod runs; the container keeps running,
// and the restarted agent adopts it: same container, restart count unchanged, exec works.
func TestKill9Adopts(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 5*time.Minute)
	node := nodeName + "-b"
	a := startAgentProcess(t, node)
	servertest.Eventually(t, 90*time.Second, 500*time.Millisecond, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(n) {
			return fmt.Errorf("node %s not Ready: %+v", node, n.Status.Conditions)
		}
		return nil
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("sleeper", node, "echo up; exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := waitPod(t, cs, ns, "sleeper", 90*time.Second, "Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	id := before.Status.ContainerStatuses[0].ContainerID

	a.kill9()
	cri, err := agentruntime.Connect(ctx, agentruntime.Layout{Dir: filepath.Join(a.dataDir, "d", "containerd")}.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	running := func() []*runtimeapi.Container {
		cs, err := cri.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(before.UID)}})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	if c := running(); len(c) != 1 || c[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || "containerd://"+c[0].Id != id {
		t.Fatalf("after kill -9 of the agent, containers %+v, want %s running", c, id)
	}

	a.start()
	// A second pod running proves the new agent has synced: its pod workers start from
	// the informer's first list, which holds the first pod too.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("second", node, "exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "second", 90*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	after, err := cs.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := after.Status.ContainerStatuses[0]
	if st.ContainerID != id || st.RestartCount != 0 || st.State.Running == nil || !podReady(after) {
		t.Errorf("after the agent's restart: %+v, want container %s running, restartCount 0, Ready", st, id)
	}
	if c := running(); len(c) != 1 {
		t.Errorf("containers of the pod after restart: %+v", c)
	}
	k := newKubectl(t, "1.33")
	out, errOut, err := k.run("exec", "-n", ns, "sleeper", "--", "echo", "hi")
	if err != nil || out != "hi\n" {
		t.Errorf("exec through the restarted agent: %q %q %v", out, errOut, err)
	}
}
