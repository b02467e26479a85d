// Package agent tests the node agent as users meet it: one in-process server with
// `kube server --agent` (its own containerd, its own bridge and pod CIDR, images imported
// from a directory because this machine has no registry), real busybox pods, and kubectl
// 1.27 (SPDY) and 1.33 (WebSocket) for logs, exec and port-forward; a second agent runs as
// a `kube agent` process so that it can be killed with SIGKILL.
//
// Everything machine-wide is unique to this package's process (bridge kube-t<pid>, pod
// CIDRs 10.234.N.0/24 and 10.235.N.0/24, and /26s of 10.239.N.0/24 for the extra agents
// of eviction_test.go) and removed when the package ends, pass or fail:
// sandboxes, containerd, bridges, routes, mounts and the ip_forward the bridge plugin
// turned on.
package agent

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/images"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
	"kubeos.dev/kube/test/netharness"
)

const busyboxImage = "kube.local/busybox:1"

var (
	srv      *servertest.Server
	dir      string
	nodeName string
	bridge   string
	podCIDR  string
	agentDir string
	imageDir string
	// cgroupRoot holds every agent's kubepods hierarchy in this package (removed at the end).
	cgroupRoot string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	dir, err = servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	n := slot.Must()
	nodeName = fmt.Sprintf("agent-t%d", os.Getpid())
	bridge = fmt.Sprintf("kube-t%d", os.Getpid())
	podCIDR = fmt.Sprintf("10.234.%d.0/24", n)
	agentDir = filepath.Join(dir, "agent")
	imageDir = filepath.Join(dir, "images")
	cgroupRoot = servertest.AgentCgroupRoot()
	forward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	defer os.WriteFile("/proc/sys/net/ipv4/ip_forward", forward, 0o644)
	defer agent.Cleanup(context.Background(), bridge, podCIDR)
	// Pods' resolv.conf: their own loopback, so nothing asks the host's resolver.
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := writeBusybox(filepath.Join(imageDir, "busybox.tar")); err != nil {
		fmt.Fprintln(os.Stderr, "busybox image:", err)
		return 1
	}
	// The server's (and in-process agent's) log: kept only when a test failed.
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("kube-agent-test-%d.log", os.Getpid()))
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
	srv, err = servertest.StartWith(filepath.Join(dir, "server"), logf, func(o *server.Options) {
		o.Agent = true
		o.AgentNodeName = nodeName
		o.AgentDataDir = agentDir
		o.AgentPort = 0
		o.AgentBridge = bridge
		o.AgentImageDir = imageDir
		o.AgentContainerdProxy = "http://127.0.0.1:9"
		o.AgentResolvConf = filepath.Join(dir, "resolv.conf")
		o.AgentCgroupRoot = cgroupRoot
		// The server's node IPAM gives the node its pod CIDR, the whole cluster CIDR here.
		o.ClusterCIDR = podCIDR
		o.NodeCIDRMaskSize = 24
		// Node client certificates live two minutes, so that an agent's rotation shows
		// (TestCertificateRotation).
		o.ClusterSigningDuration = 2 * time.Minute
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		return 1
	}
	// Whatever a test left goes once the server (and its agent) stopped.
	defer func() {
		srv.Stop()
		netharness.RemoveSandboxes(agentDir, "")
		unmountUnder(dir)
		if err := servertest.RemoveAgentCgroupRoot(); err != nil {
			fmt.Fprintln(os.Stderr, "cgroups left:", err)
		}
	}()
	code = m.Run()
	return code
}

// writeBusybox writes an OCI archive of busybox-static with one symlink per applet.
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
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
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

func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// namespace makes a namespace for one test, deleted at its end.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = cs.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// busyboxPod is a pod of one busybox container on node running sh -c script.
func busyboxPod(name, node, script string) *corev1.Pod {
	grace := int64(5)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(bool),
			Containers: []corev1.Container{{
				Name: "main", Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// waitPod polls the pod until ok says it is as wanted.
func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string, d time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	servertest.Eventually(t, d, 200*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = p
		if !ok(p) {
			return fmt.Errorf("pod %s/%s not %s: phase %s, conditions %v, containers %+v", ns, name, what, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		return nil
	})
	return last
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
