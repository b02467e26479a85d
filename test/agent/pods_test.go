package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	agentruntime "kubeos.dev/kube/internal/agent/runtime"
	"kubeos.dev/kube/internal/server/servertest"
)

const httpdScript = `mkdir -p /www && echo hello-agent > /www/index.html && echo started && exec httpd -f -vv -p 8080 -h /www`

func httpdPod(name, node string) *corev1.Pod {
	p := busyboxPod(name, node, httpdScript)
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	return p
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestHTTPDPod: a busybox httpd with a readiness probe becomes Ready, answers at its pod
// IP from the host, and kubectl 1.27 and 1.33 get its logs (also following), exec in it and
// port-forward to it.
func TestHTTPDPod(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, httpdPod("web", nodeName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, cs, ns, "web", 90*time.Second, "Ready", podReady)
	// The kubelet's condition order.
	var types []corev1.PodConditionType
	for _, c := range p.Status.Conditions {
		types = append(types, c.Type)
	}
	want := []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("conditions %v, want %v", types, want)
	}
	if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(podCIDR, "0/24")) {
		t.Errorf("pod IP %q not in %s", p.Status.PodIP, podCIDR)
	}
	if body, err := get("http://" + p.Status.PodIP + ":8080/"); err != nil || strings.TrimSpace(body) != "hello-agent" {
		t.Fatalf("GET pod IP: %q, %v", body, err)
	}
	for _, v := range []string{"1.27", "1.33"} {
		t.Run("kubectl"+v, func(t *testing.T) {
			k := newKubectl(t, v)
			servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
				out, errOut, err := k.run("logs", "-n", ns, "web")
				if err != nil || !strings.Contains(out, "started") {
					return fmt.Errorf("logs: %q %q %v", out, errOut, err)
				}
				return nil
			})
			out, errOut, err := k.run("exec", "-n", ns, "web", "--", "sh", "-c", "echo hi; echo err >&2")
			if err != nil || out != "hi\n" || !strings.Contains(errOut, "err") {
				t.Errorf("exec: %q %s %v", out, errOut, err)
			}
			out, errOut, err = servertest.RunKubectl(k.bin, k.home, srv.Kubeconfig, "from-stdin\n", "exec", "-i", "-n", ns, "web", "--", "cat")
			if err != nil || out != "from-stdin\n" {
				t.Errorf("exec -i cat: %q %q %v", out, errOut, err)
			}
			out, _, err = k.run("exec", "-n", ns, "web", "--", "sh", "-c", "exit 3")
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
				t.Errorf("exec exit 3: %q %v", out, err)
			}
			// logs -f: a request through the httpd shows up in the followed stream.
			k.follow(t, []string{"logs", "-f", "-n", ns, "web"}, func() {
				_, _ = get("http://" + p.Status.PodIP + ":8080/followed-" + v)
			}, "followed-"+v)
			// port-forward
			k.portForward(t, ns, "pod/web", "8080", func(port string) error {
				body, err := get("http://127.0.0.1:" + port + "/")
				if err != nil || strings.TrimSpace(body) != "hello-agent" {
					return fmt.Errorf("through port-forward: %q %v", body, err)
				}
				return nil
			})
		})
	}
	// timestamps and tailLines through the API.
	raw, err := cs.CoreV1().Pods(ns).GetLogs("web", &corev1.PodLogOptions{Timestamps: true, TailLines: new(int64)}).DoRaw(ctx)
	if err != nil || len(raw) != 0 {
		t.Errorf("tailLines=0: %q %v", raw, err)
	}
	one := int64(1)
	raw, err = cs.CoreV1().Pods(ns).GetLogs("web", &corev1.PodLogOptions{Timestamps: true, LimitBytes: &one}).DoRaw(ctx)
	if err != nil || len(raw) != 1 {
		t.Errorf("limitBytes=1: %q %v", raw, err)
	}
}

// kubectl is one kubectl version with its own HOME.
type kubectl struct {
	t    *testing.T
	bin  string
	home string
}

func newKubectl(t *testing.T, version string) *kubectl {
	bin, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, bin: bin, home: t.TempDir()}
}

func (k *kubectl) run(args ...string) (string, string, error) {
	return servertest.RunKubectl(k.bin, k.home, srv.Kubeconfig, "", args...)
}

func (k *kubectl) start(args ...string) (*exec.Cmd, io.ReadCloser) {
	k.t.Helper()
	cmd := exec.Command(k.bin, args...)
	cmd.Env = []string{"HOME=" + k.home, "KUBECONFIG=" + srv.Kubeconfig, "KUBECACHEDIR=" + filepath.Join(k.home, "cache"), "PATH=/usr/bin:/bin"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out
}

// follow runs kubectl args, calls poke until want appears in its output.
func (k *kubectl) follow(t *testing.T, args []string, poke func(), want string) {
	t.Helper()
	_, out := k.start(args...)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	poke()
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%v ended before %q: %q", args, want, seen)
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				return
			}
		case <-tick.C:
			poke()
		case <-deadline:
			t.Fatalf("%v: no %q within 30 s: %q", args, want, seen)
		}
	}
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`)

// portForward runs kubectl port-forward target :port and calls check with the local port.
func (k *kubectl) portForward(t *testing.T, ns, target, port string, check func(local string) error) {
	t.Helper()
	_, out := k.start("port-forward", "-n", ns, target, ":"+port)
	sc := bufio.NewScanner(out)
	local := ""
	for sc.Scan() {
		if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
			local = m[1]
			break
		}
	}
	if local == "" {
		t.Fatal("kubectl port-forward printed no local port")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	servertest.Eventually(t, 20*time.Second, 500*time.Millisecond, func() error { return check(local) })
}

// TestLivenessRestart: a failing liveness probe restarts the container; the restart count
// and lastState show it.
func TestLivenessRestart(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 2*time.Minute)
	p := busyboxPod("live", nodeName, "touch /tmp/ok; sleep 2; rm /tmp/ok; exec sleep 1000")
	p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ok"}}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, ns, "live", 90*time.Second, "restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	if lt := got.Status.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil {
		t.Errorf("no lastState.terminated after a liveness restart: %+v", got.Status.ContainerStatuses[0])
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason)
	}
	if !strings.Contains(strings.Join(reasons, " "), "Unhealthy") {
		t.Errorf("no Unhealthy event: %v", reasons)
	}
}

// TestCrashLoop: a container that keeps failing shows CrashLoopBackOff with its exit in
// lastState.
func TestCrashLoop(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 2*time.Minute)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("crash", nodeName, "echo dying; exit 3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, ns, "crash", 90*time.Second, "in CrashLoopBackOff", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
	cst := got.Status.ContainerStatuses[0]
	if lt := cst.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
		t.Errorf("lastState %+v, want terminated exit 3 Error", cst.LastTerminationState)
	}
	if cst.RestartCount < 1 {
		t.Errorf("restartCount %d", cst.RestartCount)
	}
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running (restartPolicy Always)", got.Status.Phase)
	}
	k := newKubectl(t, "1.33")
	out, errOut, err := k.run("logs", "--previous", "-n", ns, "crash")
	if err != nil || strings.TrimSpace(out) != "dying" {
		t.Errorf("logs --previous: %q %q %v", out, errOut, err)
	}
}

// TestMissingImage: an image nowhere to be found gives ErrImagePull, then
// ImagePullBackOff, with the runtime's message.
func TestMissingImage(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 2*time.Minute)
	p := busyboxPod("noimage", nodeName, "true")
	p.Spec.Containers[0].Image = "kube.local/no-such-image:1"
	p.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	waitPod(t, cs, ns, "noimage", 90*time.Second, "in ImagePullBackOff", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		seen[w.Reason] = w.Message
		return w.Reason == "ImagePullBackOff"
	})
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, "kube.local/no-such-image:1") {
		t.Errorf("no Failed event naming the image: %+v (waiting reasons seen %v)", evs.Items, seen)
	}
}

// TestGracefulDeletion: deleting a pod stops its container with SIGTERM (the shell's trap
// runs) and the agent's final delete removes the object; the sandbox is gone from the
// runtime.
func TestGracefulDeletion(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 2*time.Minute)
	p := busyboxPod("grace", nodeName, `trap 'echo got TERM; exit 0' TERM; echo up; while true; do sleep 0.2; done`)
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "grace", 90*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "grace", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The container's exit (the trap's code 0) is in the last status written before the
	// final delete: watch for it.
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=grace", ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var exit *corev1.ContainerStateTerminated
	for ev := range w.ResultChan() {
		if pod, ok := ev.Object.(*corev1.Pod); ok {
			if len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Terminated != nil {
				exit = pod.Status.ContainerStatuses[0].State.Terminated
			}
		}
		if ev.Type == "DELETED" {
			break
		}
	}
	if exit == nil || exit.ExitCode != 0 {
		t.Errorf("final container state %+v, want terminated with the trap's exit 0 (SIGTERM, not SIGKILL)", exit)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "grace", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still there: %v", err)
	}
	cri, err := agentruntime.Connect(ctx, agentruntime.Layout{Dir: filepath.Join(agentDir, "containerd")}.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := cri.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(created.UID)}})
	if err != nil || len(sbs) != 0 {
		t.Errorf("sandboxes left: %v %v", sbs, err)
	}
}

var _ = context.Background
