package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

//go:embed stages.yaml
var stagesYAML []byte

// kcmExtraArgs are more kube-controller-manager flags (-kcm-args).
var kcmExtraArgs []string

// simNodes is how many simulated nodes each side gets (sim-1 … sim-3).
const simNodes = 3

// nodeGrace is --node-monitor-grace-period on both sides (upstream's default is 50 s; shorter
// keeps the node-lifecycle scenario short, the same on both sides).
const nodeGrace = "30s"

// side is one control plane under test and the processes it runs.
type side struct {
	name       string // "kube" or "peer"
	dir        string
	kubeconfig string
	cfg        *rest.Config
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	procs      []*exec.Cmd
	stop       []func()
}

// close stops what the side started, newest first.
func (s *side) close() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		if p.Process == nil {
			continue
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	for i := len(s.stop) - 1; i >= 0; i-- {
		s.stop[i]()
	}
}

func (s *side) start(name string, args []string, env ...string) error {
	log, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startKube runs `kube server` (its own controllers and scheduler, no simulated nodes in
// process) and `kube sim` against it.
func startKube(ctx context.Context, bin, dir string) (*side, error) {
	s := &side{name: "kube", dir: dir}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := s.start("kube-server", []string{bin, "server", "--data-dir", data, "--secure-port", strconv.Itoa(port),
		"--embedded-nats=false", "--embedded-s3=false", "--log-level", "warn",
		"--node-monitor-grace-period", nodeGrace}); err != nil {
		return s, err
	}
	s.kubeconfig = filepath.Join(data, "kubeconfig")
	if err := waitFile(ctx, s.kubeconfig); err != nil {
		return s, fmt.Errorf("kube: %w (see %s)", err, filepath.Join(dir, "kube-server.log"))
	}
	return s, s.connect(ctx, bin)
}

// startPeer runs etcd and kube-apiserver through ../shared/peers/run-kube-apiserver.sh, then
// kube-controller-manager (every default controller) and kube-scheduler, then `kube sim`.
func startPeer(ctx context.Context, peerBin, script, kubeBin, schedBin, dir string) (*side, error) {
	s := &side{name: "peer", dir: dir}
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	state := filepath.Join(dir, "state")
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	env := append(os.Environ(), "KAPI_STATE="+state, "ETCD_BIN="+filepath.Join(peerBin, "etcd"), "ETCD_NO_FSYNC=1",
		"APISERVER_PORT="+strconv.Itoa(ports[0]), "ETCD_PORT="+strconv.Itoa(ports[1]), "ETCD_PEER_PORT="+strconv.Itoa(ports[2]))
	cmd := exec.CommandContext(ctx, script, s.kubeconfig, peerBin)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	s.stop = append(s.stop, func() {
		c := exec.Command(script, "stop")
		c.Env = env
		_ = c.Run()
	})
	if err != nil {
		return s, fmt.Errorf("peer: %s: %w\n%s", script, err, out)
	}
	pki := filepath.Join(state, "pki")
	if err := s.start("kube-controller-manager", append([]string{filepath.Join(peerBin, "kube-controller-manager"),
		"--kubeconfig", s.kubeconfig, "--controllers=*", "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"), "--root-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--cluster-signing-cert-file=" + filepath.Join(pki, "ca.crt"), "--cluster-signing-key-file=" + filepath.Join(pki, "ca.key"),
		// Kube's defaults, so that both sides' Nodes get a spec.podCIDR.
		"--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16",
		"--node-monitor-grace-period=" + nodeGrace}, kcmExtraArgs...)); err != nil {
		return s, err
	}
	if err := s.start("kube-scheduler", []string{schedBin, "--kubeconfig", s.kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0"}); err != nil {
		return s, err
	}
	return s, s.connect(ctx, kubeBin)
}

// connect makes the side's clients, waits for its API, starts `kube sim` and waits for the
// nodes to be Ready.
func (s *side) connect(ctx context.Context, kubeBin string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "kube-oracle"
	s.cfg = cfg
	if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if s.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := s.cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("%s: API or default ServiceAccount not ready: %w", s.name, err)
	}
	stages := filepath.Join(s.dir, "stages.yaml")
	if err := os.WriteFile(stages, stagesYAML, 0o644); err != nil {
		return err
	}
	if err := s.start("kube-sim", []string{kubeBin, "sim", "--kubeconfig", s.kubeconfig, "--nodes", strconv.Itoa(simNodes),
		"--stages", stages, "--log-level", "warn"}); err != nil {
		return err
	}
	return poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		nl, err := s.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nl.Items {
			// Ready, with a pod range, and without the not-ready taint the node lifecycle
			// controller gives a new Node (scenarios start on schedulable nodes).
			if nodeReady(&n) && n.Spec.PodCIDR != "" && len(n.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == simNodes, nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitFile(ctx context.Context, path string) error {
	return poll(ctx, 3*time.Minute, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
}

// poll checks cond every 200 ms until it holds, returns an error, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("not within %s", timeout)
	}
	return err
}
