package lifecycle

// The volume suite tests Volumes, the local-path provisioner and persistentVolumeClaim
// volumes as users meet them: one in-process `kube server --agent` (its own containerd,
// bridge kvol<pid>, cluster CIDR 10.241.N.0/23, busybox imported from a directory), Volumes
// written through the generated client, pods scheduled by the scheduler (so that the
// VolumeBinding plugin picks the node of WaitForFirstConsumer claims), files checked on the
// agent's disk.
//
// Everything machine-wide is unique to this package's process and removed when it ends,
// pass or fail: sandboxes, containerd, the bridge, routes and mounts.

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

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/images"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
	"kubeos.dev/kube/internal/simnode"
	kubeos "kubeos.dev/kube/pkg/client/clientset/versioned/typed/kubeos/v1alpha1"
	"kubeos.dev/kube/test/netharness"
)

const busyboxImage = "kube.local/busybox:1"

var (
	volumeSrv *servertest.Server
	nodeName  string
	agentDir  string
)

var volumeSuite = servertest.NewFixture("volume", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	nodeName = fmt.Sprintf("vol-t%d", os.Getpid())
	bridge := fmt.Sprintf("kvol%d", os.Getpid())
	// Two /24 node blocks: one for the agent's node, one for the simulated node.
	podCIDR := fmt.Sprintf("10.241.%d.0/23", slot.Must()*2)
	agentDir = filepath.Join(dir, "agent")
	imageDir := filepath.Join(dir, "images")
	forward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	fx.Cleanup(func() { os.WriteFile("/proc/sys/net/ipv4/ip_forward", forward, 0o644) })
	fx.Cleanup(func() { agent.Cleanup(context.Background(), bridge, podCIDR) })
	fx.Cleanup(func() { _ = servertest.RemoveAgentCgroupRoot() })
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	if err := writeBusybox(filepath.Join(imageDir, "busybox.tar")); err != nil {
		return fmt.Errorf("busybox image: %w", err)
	}
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("kube-volume-test-%d.log", os.Getpid()))
	logf, _ := os.Create(logPath)
	fx.Cleanup(func() {
		logf.Close()
		if fx.Failed() {
			fmt.Fprintln(os.Stderr, "server and agent log:", logPath)
		} else {
			os.Remove(logPath)
		}
	})
	volumeSrv, err = servertest.StartWith(filepath.Join(dir, "server"), logf, func(o *server.Options) {
		o.Agent = true
		o.AgentNodeName = nodeName
		o.AgentDataDir = agentDir
		o.AgentPort = 0
		o.AgentBridge = bridge
		o.AgentImageDir = imageDir
		o.AgentContainerdProxy = "http://127.0.0.1:9"
		o.AgentResolvConf = filepath.Join(dir, "resolv.conf")
		o.AgentCgroupRoot = servertest.AgentCgroupRoot()
		o.ClusterCIDR = podCIDR
		o.NodeCIDRMaskSize = 24
		// One simulated node (no agent, no disk) for the provisioner's simulated path;
		// the other tests' pods select the real node.
		o.SimNodes = simnode.Options{Nodes: 1, Prefix: "volsim-"}
		// The embedded S3 store holds the Bucket a Volume's Backup writes to.
		o.EmbeddedS3 = true
	})
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() {
		volumeSrv.Stop()
		netharness.RemoveSandboxes(agentDir, "")
		unmountUnder(dir)
	})
	return nil
})

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

func clients(t *testing.T) (*kubernetes.Clientset, *kubeos.KubeosV1alpha1Client) {
	t.Helper()
	cfg, err := volumeSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kubeos.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, ks
}

// namespace makes a namespace for one test, deleted at its end.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
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

// claimPod is a pod of one busybox container running script with claim mounted at /data;
// node "" leaves the choice to the scheduler, among the agent's node only.
func claimPod(name, node, claim, script string) *corev1.Pod {
	grace := int64(2)
	var selector map[string]string
	if node == "" {
		selector = map[string]string{corev1.LabelHostname: nodeName}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			NodeSelector:                  selector,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(bool),
			Containers: []corev1.Container{{
				Name: "main", Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

// runPod creates pod in ns and waits until it ends; it returns the final pod.
func runPod(t *testing.T, cs kubernetes.Interface, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	servertest.Eventually(t, 3*time.Minute, 250*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = p
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("pod %s: phase %s, node %q, conditions %v, containers %+v", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		return nil
	})
	return last
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still there", name)
		}
		return nil
	})
}
