// Command scheduler measures Kube's in-process scheduler beside kube-scheduler v1.37.2 on
// the same Kube server build, and compares their placements.
//
//	go run ./bench/scheduler -kube ./kube -peer /work/peers-bin/kube-scheduler bench -shape basic   # also spread, antiaffinity
//	go run ./bench/scheduler -kube ./kube -peer /work/peers-bin/kube-scheduler compare
//
// bench: one `kube server --scheduler=false` (and no controllers, as scheduler_perf runs
// an API server alone) gets scheduler_perf's nodes (Node objects: capacity and Ready
// status, no agents) and initial pods (created bound); both schedulers authenticate as
// system:kube-scheduler, as deployed (-identity admin: system:masters, exempt from API
// priority and fairness); then for each
// scheduler in turn, its measured pods are created in a namespace of its own, all pending,
// and the scheduler starts as its own process — kube-scheduler, or this program's `sched`
// command running internal/scheduler — until every measured pod is bound. Reported: pods/s
// from the first to the last binding, and both processes' CPU seconds (/proc) over that
// window (antiaffinity: a fresh server per scheduler, as the first run's pods would repel
// the second's).
//
// sched: runs internal/scheduler against -kubeconfig until SIGTERM (used by bench).
//
// compare: two servers, one scheduling with Kube's scheduler, one with kube-scheduler; the
// same 50 nodes and the same pods (node selector, affinity, taints, host ports, zone
// spread, anti-affinity, requests that fit some nodes, preemption, a WaitForFirstConsumer
// volume, preemption with a PodDisruptionBudget) on both; prints every
// pod's node (or unschedulable message) side by side and exits 1 on a difference.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

var (
	kubeBin = flag.String("kube", "./kube", "the kube binary")
	peerBin = flag.String("peer", "/work/peers-bin/kube-scheduler", "kube-scheduler v1.37.2")
	workDir = flag.String("dir", "", "working directory (default a temporary one, removed after)")
)

func main() {
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: scheduler [flags] bench|compare|sched [flags]")
		os.Exit(2)
	}
	dir := *workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "kube-sched-bench-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var err error
	switch flag.Arg(0) {
	case "bench":
		err = bench(dir, flag.Args()[1:])
	case "compare":
		err = compare(dir)
	case "sched":
		err = sched(flag.Args()[1:])
	default:
		err = fmt.Errorf("unknown command %q", flag.Arg(0))
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

// proc is a started process with its log file.
type proc struct {
	cmd *exec.Cmd
	log *os.File
}

func start(dir, name, bin string, args ...string) (*proc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	return &proc{cmd: cmd, log: f}, nil
}

// cpu is the process's user+system CPU seconds so far (/proc/<pid>/stat, 100 ticks/s).
func (p *proc) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(fields[11], 64)
	k, _ := strconv.ParseFloat(fields[12], 64)
	return (u + k) / 100
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.log.Close()
}

// server is one `kube server` on its own data directory and port.
type server struct {
	dir  string
	port int
	proc *proc
	cs   *kubernetes.Clientset
}

// Controllers that would act on agentless nodes (taint them NotReady, hand out CIDRs) are
// off: the Node objects here have no heartbeat.
const quietControllers = "*,-node-lifecycle-controller,-node-ipam-controller,-taint-eviction-controller"

// noControllers is bench's server: no cluster controller (a list of exclusions without "*"
// enables none) and no workload controller, as scheduler_perf runs an API server and the
// scheduler alone. The TTL controller alone rewrites every Node each time the node count
// crosses one of its thresholds (100, 500, 1,000, 2,000): ~8,600 node writes while 5,000
// nodes are created, which ran into the measurement and reset the scheduler's view of the
// nodes.
var noControllers = []string{"--cluster-controllers=-ttl-controller", "--disable-workload-controllers"}

// startServer starts a server and waits for /readyz; a server that dies while starting
// (a loaded machine can make its bootstrap time out) is started again, up to 3 times.
// extra replaces the --cluster-controllers default (quietControllers) when it names the flag.
func startServer(dir string, port int, schedulerOn bool, extra ...string) (*server, error) {
	var err error
	for attempt := range 3 {
		var s *server
		if s, err = startServerOnce(dir, port, schedulerOn, attempt, extra...); err == nil {
			return s, nil
		}
		fmt.Fprintln(os.Stderr, "retrying:", err)
	}
	return nil, err
}

func startServerOnce(dir string, port int, schedulerOn bool, attempt int, extra ...string) (*server, error) {
	args := []string{"server", "--data-dir", filepath.Join(dir, "data"), "--secure-port", strconv.Itoa(port), "--scheduler=" + strconv.FormatBool(schedulerOn)}
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--cluster-controllers=") }) {
		args = append(args, "--cluster-controllers="+quietControllers)
	}
	args = append(args, extra...)
	p, err := start(dir, fmt.Sprintf("kube-%d-%v-%d-%d", port, schedulerOn, time.Now().Unix(), attempt), *kubeBin, args...)
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, port: port, proc: p}
	exited := make(chan struct{})
	go func() { _, _ = p.cmd.Process.Wait(); close(exited) }()
	deadline := time.Now().Add(300 * time.Second)
	for {
		if cs, err := s.client(); err == nil {
			if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil {
				if _, err := cs.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
					s.cs = cs
					return s, nil
				}
			}
		}
		select {
		case <-exited:
			p.log.Close()
			return nil, fmt.Errorf("kube server on %d exited while starting (see %s)", port, p.log.Name())
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("kube server on %d not ready (see %s)", port, p.log.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *server) kubeconfig() string { return filepath.Join(s.dir, "data", "kubeconfig") }

func (s *server) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	return kubernetes.NewForConfig(cfg)
}

// schedulerKubeconfig writes a kubeconfig for kube-scheduler's own identity
// (system:kube-scheduler, as a deployed kube-scheduler authenticates): the server's
// bootstrap RBAC grants it the system:kube-scheduler role and API priority and fairness
// puts it in workload-high, where Kube's in-process scheduler runs too (the admin
// identity is exempt from both).
func (s *server) schedulerKubeconfig() (string, error) {
	path := filepath.Join(s.dir, "scheduler.kubeconfig")
	out, err := exec.Command(*kubeBin, "certs", "user", "system:kube-scheduler", "--data-dir", filepath.Join(s.dir, "data"), "-o", path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kube certs user system:kube-scheduler: %w: %s", err, out)
	}
	return path, nil
}

// startPeer runs kube-scheduler against s through kubeconfig with scheduler_perf's client
// limits (qps and burst 5000: its default 50 would measure the rate limiter) and no leader
// election (the server's idle scheduler controller holds the kube-scheduler Lease; see the
// README).
func startPeer(s *server, kubeconfig string) (*proc, error) {
	cfg := filepath.Join(s.dir, "peer-config.yaml")
	conf := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
`, kubeconfig)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return start(s.dir, "kube-scheduler", *peerBin, "--config", cfg, "--secure-port=0",
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig)
}

// node is a Node object as scheduler_perf's node-default (plus a zone).
func node(name, zone, cpu, memory string, labels map[string]string, taints []corev1.Taint) *corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": zone}
	for k, v := range labels {
		l[k] = v
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}}
}

func createNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = n.Status
		cur, err = cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		// The node.kubernetes.io/not-ready taint admission put on the new node comes off
		// here, as the node lifecycle controller (off in these runs) would take it off a
		// Ready node.
		cur.Spec.Taints = n.Spec.Taints
		_, err = cs.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// parallel runs f(i) for i in [0,n) on workers goroutines; the first error wins.
func parallel(n, workers int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func pausePod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}}}}}}
}
