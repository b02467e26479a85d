// Command compare measures `kube agent` beside the real kubelet v1.37.2 on this machine,
// against one `kube server`, as issue 16's performance section asks:
//
//   - pod startup: N busybox pods created at once, then N one after another (each after
//     the previous is Ready), timed from the client's create call to the watch event that
//     shows the pod Ready (milliseconds, the same watcher for both sides);
//
//   - idle cost: 110 idle pods on the node, then the node process's own CPU seconds
//     (utime+stime from /proc, children excluded) over -hold, and its RSS.
//
//     go build -o /tmp/kube ./cmd/kube && go build -o /tmp/agentcmp ./bench/agent/compare
//     flock /tmp/kube-bench.lock /tmp/agentcmp -kube /tmp/kube -k8s-bin /tmp/k8s/bin
//
// The kubelet runs through ../shared/peers/run-kubelet.sh (its own containerd 1.6 + runc,
// the local pause and busybox images, node name localhost); the agent is `kube agent`
// with its own containerd (the same Debian binaries, started and supervised by the
// agent), the same busybox image archive imported through --image-dir, and the node
// features the kubelet does not have turned off (Service proxy, DNS, NetworkPolicy,
// gateway: kube-proxy and CoreDNS are separate processes upstream). The two sides run one
// after the other, kubelet first, so neither measures beside the other's pods. Both use
// the server's admin kubeconfig. Must run as root.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	kubeBin = flag.String("kube", "./kube", "the kube binary")
	k8sBin  = flag.String("k8s-bin", "/tmp/k8s/bin", "directory holding the kubelet v1.37.2 (../shared/peers/build-k8s.sh)")
	peers   = flag.String("peers", "", "../shared/peers directory (default: next to the module)")
	n       = flag.Int("n", 30, "pods per startup run")
	idle    = flag.Int("idle", 110, "idle pods for the CPU and RSS figure")
	settle  = flag.Duration("settle", 30*time.Second, "wait after the idle pods are Ready before sampling")
	hold    = flag.Duration("hold", 120*time.Second, "sampling window of the idle cost")
	sides   = flag.String("sides", "kubelet,kube", "which node processes to measure, in order: kubelet, or kube with optional modifiers, "+
		"kube@BIN (the agent from another kube binary), kube+--flag=value (an extra agent flag), kube+NAME=value (an environment variable), e.g. kube+GOGC=50+--release-startup-memory=false")
	every   = flag.Duration("every", 30*time.Second, "print a memory line this often during the idle hold")
	keep    = flag.Bool("keep", false, "keep the working directory")
	busybox = flag.String("busybox", "", "busybox image archive for the agent (default: the one run-kubelet.sh wrote on the kubelet side)")
)

const image = "k8s.local/busybox:1.35"

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "kube-agentcmp-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	if *peers == "" {
		wd, _ := os.Getwd()
		*peers = filepath.Join(wd, "..", "shared", "peers")
	}
	port := freePort()
	srv := exec.Command(*kubeBin, "server", "--data-dir", filepath.Join(dir, "server"), "--secure-port", strconv.Itoa(port),
		"--cluster-cidr", "10.239.0.0/16", "--node-cidr-mask-size", "24")
	slog, _ := os.Create(filepath.Join(dir, "server.log"))
	srv.Stdout, srv.Stderr = slog, slog
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	kcfg := filepath.Join(dir, "server", "kubeconfig")
	cs, err := waitServer(kcfg)
	if err != nil {
		return err
	}
	fmt.Printf("kube server on :%d, work dir %s\n", port, dir)
	var rows []string
	for _, side := range strings.Split(*sides, ",") {
		var r result
		switch {
		case side == "kubelet":
			r, err = kubeletSide(cs, dir, kcfg)
		case side == "kube" || strings.HasPrefix(side, "kube@") || strings.HasPrefix(side, "kube+"):
			r, err = agentSide(cs, dir, kcfg, parseAgentSide(side))
		default:
			err = fmt.Errorf("unknown side %q", side)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", side, err)
		}
		rows = append(rows, r.String(side))
		fmt.Println(r.String(side))
	}
	fmt.Println("\nside | batch p50 | batch p99 | serial p50 | serial p99 | idle CPU (cores) | idle RSS first / max / last (anonymous, file; the binary's) | minor faults/s | runtime CPU (cores)")
	for _, r := range rows {
		fmt.Println(r)
	}
	return nil
}

type result struct {
	batch, serial []time.Duration
	cpu, rtCPU    float64 // cores over the hold
	firstMB       float64 // VmRSS at the start of the hold
	rssMB         float64 // max VmRSS over the hold
	last          memSample
	minflt        float64 // minor faults a second over the hold
	load          string
}

func (r result) String(side string) string {
	return fmt.Sprintf("%s | %s | %s | %s | %s | %.4f | %.1f / %.1f / %.1f MB (anon %.1f, file %.1f; binary %.1f) | %.1f | %.4f   (load %s)", side,
		pct(r.batch, 0.5), pct(r.batch, 0.99), pct(r.serial, 0.5), pct(r.serial, 0.99), r.cpu,
		r.firstMB, r.rssMB, r.last.rss, r.last.anon, r.last.file, r.last.exe, r.minflt, r.rtCPU, r.load)
}

// memSample is a process's resident memory at one moment, in MB: VmRSS, RssAnon, RssFile,
// and the resident pages of its executable's mappings (/proc/PID/smaps) by permission:
// code (r-x), read-only data (r--: rodata, pclntab, symbols) and data (rw-, whose touched
// pages are the process's own).
type memSample struct {
	rss, anon, file              float64
	exe, exeText, exeRO, exeData float64
}

func sampleMem(pid int) memSample {
	m := memSample{rss: statusMB(pid, "VmRSS:"), anon: statusMB(pid, "RssAnon:"), file: statusMB(pid, "RssFile:")}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return m
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return m
	}
	defer f.Close()
	var cur *float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 5 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":"):
			cur = nil
			if len(fs) >= 6 && fs[5] == exe {
				switch fs[1][:3] {
				case "r-x":
					cur = &m.exeText
				case "r--":
					cur = &m.exeRO
				default:
					cur = &m.exeData
				}
			}
		case len(fs) >= 2 && fs[0] == "Rss:" && cur != nil:
			kb, _ := strconv.ParseFloat(fs[1], 64)
			*cur += kb / 1024
		}
	}
	m.exe = m.exeText + m.exeRO + m.exeData
	return m
}

func (m memSample) String() string {
	return fmt.Sprintf("RSS %.1f MB (anon %.1f, file %.1f); the binary's pages %.1f MB (code %.1f, read-only %.1f, data %.1f)",
		m.rss, m.anon, m.file, m.exe, m.exeText, m.exeRO, m.exeData)
}

// minorFaults is the process's minflt (/proc/PID/stat field 10).
func minorFaults(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fs := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	v, _ := strconv.ParseFloat(fs[7], 64)
	return v
}

// agentVariant is a kube side's modifiers: another binary, extra flags, environment.
type agentVariant struct {
	bin  string
	args []string
	env  []string
}

// parseAgentSide reads "kube[@BIN][+--flag=v][+NAME=v]...".
func parseAgentSide(side string) agentVariant {
	v := agentVariant{bin: *kubeBin}
	parts := strings.Split(side, "+")
	if _, bin, ok := strings.Cut(parts[0], "@"); ok {
		v.bin = bin
	}
	for _, p := range parts[1:] {
		if strings.HasPrefix(p, "-") {
			v.args = append(v.args, p)
		} else {
			v.env = append(v.env, p)
		}
	}
	return v
}

func pct(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q * float64(len(s)))
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i].Round(time.Millisecond).String()
}

// kubeletSide starts containerd + the kubelet with run-kubelet.sh, measures, and stops them.
func kubeletSide(cs *kubernetes.Clientset, dir, kcfg string) (result, error) {
	state := filepath.Join(dir, "kubelet")
	env := append(os.Environ(), "KUBELET_STATE="+state, "NODE_NAME=localhost", "CNI_BRIDGE=kbcmp1",
		"POD_CIDR=10.238.0.0/24", "KUBELET_PORT="+strconv.Itoa(freePort()),
		// Both sides evict on memory only: a shared machine's disk may fall under the
		// kubelet's 15 % imagefs threshold while the bench runs.
		"KUBELET_EXTRA_ARGS=--eviction-hard=memory.available<100Mi")
	script := filepath.Join(*peers, "run-kubelet.sh")
	start := exec.Command(script, kcfg, *k8sBin)
	start.Env, start.Stdout, start.Stderr = env, os.Stdout, os.Stderr
	stop := func() {
		c := exec.Command(script, "stop")
		c.Env, c.Stdout, c.Stderr = env, os.Stdout, os.Stderr
		_ = c.Run()
	}
	defer stop()
	if err := start.Run(); err != nil {
		return result{}, fmt.Errorf("run-kubelet.sh: %w", err)
	}
	pids, err := readPids(filepath.Join(state, "pids"))
	if err != nil {
		return result{}, err
	}
	return measure(cs, "localhost", pids["kubelet"], pids["containerd"], "")
}

// agentRuns counts the kube sides run so far.
var agentRuns int

// agentSide starts `kube agent` with its own containerd, measures, and stops it.
func agentSide(cs *kubernetes.Clientset, dir, kcfg string, v agentVariant) (result, error) {
	agentRuns++
	adir := filepath.Join(dir, "agent")
	if agentRuns > 1 { // an earlier kube side's data directory stays as it was
		adir += strconv.Itoa(agentRuns)
	}
	imgs := filepath.Join(dir, "agent-images")
	if err := os.MkdirAll(imgs, 0o755); err != nil {
		return result{}, err
	}
	// The kubelet side wrote the busybox archive; reuse it (same image, same bytes).
	src := filepath.Join(dir, "kubelet", "images", "busybox.tar")
	if *busybox != "" {
		src = *busybox
	}
	if err := exec.Command("cp", src, filepath.Join(imgs, "busybox.tar")).Run(); err != nil {
		return result{}, fmt.Errorf("busybox archive %s (run the kubelet side first): %w", src, err)
	}
	resolv := filepath.Join(dir, "resolv.conf")
	_ = os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions ndots:1\n"), 0o644)
	const node = "kube-agent-node"
	cmd := exec.Command(v.bin, "agent", "--kubeconfig", kcfg, "--data-dir", adir, "--node-name", node,
		"--port", strconv.Itoa(freePort()), "--address", "127.0.0.1", "--bridge", "kbcmp2", "--cluster-cidr", "10.239.0.0/16",
		"--image-dir", imgs, "--containerd-proxy", "http://127.0.0.1:9", "--resolv-conf", resolv,
		"--services=false", "--dns=false", "--network-policy=false", "--gateway=false", "--node-routes=false",
		"--eviction-hard", "memory.available<100Mi")
	cmd.Args = append(cmd.Args, v.args...)
	cmd.Env = append(os.Environ(), v.env...)
	fmt.Printf("agent: %s %s\n", strings.Join(v.env, " "), strings.Join(cmd.Args, " "))
	logPath := filepath.Join(adir + ".log")
	alog, _ := os.Create(logPath)
	cmd.Stdout, cmd.Stderr = alog, alog
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		cleanup := exec.Command(*kubeBin, "agent", "--cleanup", "--data-dir", adir, "--bridge", "kbcmp2", "--cluster-cidr", "10.239.0.0/16",
			"--services=false", "--dns=false", "--network-policy=false", "--gateway=false", "--node-routes=false")
		_ = cleanup.Run()
		_ = exec.Command("ip", "link", "del", "kbcmp2").Run()
	}()
	if err := waitNodeReady(cs, node, 3*time.Minute); err != nil {
		return result{}, err
	}
	ctrPid := 0
	if b, err := os.ReadFile(filepath.Join(adir, "containerd", "containerd.pid")); err == nil {
		ctrPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return measure(cs, node, cmd.Process.Pid, ctrPid, logPath)
}

// measure runs the three phases on node; pid is the node process, rtPid its runtime's.
// traceLog, when set, is the agent's log: its "pod startup" lines split each startup into
// steps (trace.go).
func measure(cs *kubernetes.Clientset, node string, pid, rtPid int, traceLog string) (result, error) {
	ctx := context.Background()
	var r result
	if err := waitNodeReady(cs, node, 3*time.Minute); err != nil {
		return r, err
	}
	ns := func(name string) (string, error) {
		full := node + "-" + name
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: full}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		// The default ServiceAccount must exist before pods can be created.
		for i := 0; i < 100; i++ {
			if _, err := cs.CoreV1().ServiceAccounts(full).Get(ctx, "default", metav1.GetOptions{}); err == nil {
				return full, nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return "", fmt.Errorf("no default ServiceAccount in %s", full)
	}
	// Warm-up pod: the first pod on a node pays one-time costs (image unpack, CNI bridge).
	warm, err := ns("warm")
	if err != nil {
		return r, err
	}
	if _, err := startPods(cs, warm, node, 1, false); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	if err := deleteAll(cs, warm); err != nil {
		return r, err
	}
	batch, err := ns("batch")
	if err != nil {
		return r, err
	}
	var times []podTimes
	if times, err = startPods(cs, batch, node, *n, false); err != nil {
		return r, fmt.Errorf("batch: %w", err)
	}
	r.batch = startups(times)
	fmt.Printf("%s: batch of %d: p50 %s p99 %s (load %s)\n", node, *n, pct(r.batch, 0.5), pct(r.batch, 0.99), loadavg())
	breakdown(traceLog, batch, times)
	if err := deleteAll(cs, batch); err != nil {
		return r, err
	}
	serial, err := ns("serial")
	if err != nil {
		return r, err
	}
	if times, err = startPods(cs, serial, node, *n, true); err != nil {
		return r, fmt.Errorf("serial: %w", err)
	}
	r.serial = startups(times)
	fmt.Printf("%s: %d one by one: p50 %s p99 %s (load %s)\n", node, *n, pct(r.serial, 0.5), pct(r.serial, 0.99), loadavg())
	breakdown(traceLog, serial, times)
	if err := deleteAll(cs, serial); err != nil {
		return r, err
	}
	idleNS, err := ns("idle")
	if err != nil {
		return r, err
	}
	if _, err := startPods(cs, idleNS, node, *idle, false); err != nil {
		return r, fmt.Errorf("idle pods: %w", err)
	}
	fmt.Printf("%s: %d idle pods Ready; settling %s, sampling %s\n", node, *idle, *settle, *hold)
	time.Sleep(*settle)
	c0, rc0, f0 := cpuSeconds(pid), cpuSeconds(rtPid), minorFaults(pid)
	t0 := time.Now()
	first := sampleMem(pid)
	r.firstMB, r.rssMB = first.rss, first.rss
	fmt.Printf("  %4.0fs %s; minor faults 0, CPU 0 s (load %s)\n", 0.0, first, loadavg())
	next := *every
	for time.Since(t0) < *hold {
		time.Sleep(5 * time.Second)
		r.rssMB = max(r.rssMB, statusMB(pid, "VmRSS:"))
		if el := time.Since(t0); el >= next || el >= *hold {
			next += *every
			fmt.Printf("  %4.0fs %s; minor faults %.0f, CPU %.2f s (load %s)\n", el.Seconds(), sampleMem(pid),
				minorFaults(pid)-f0, cpuSeconds(pid)-c0, loadavg())
		}
	}
	el := time.Since(t0).Seconds()
	r.cpu = (cpuSeconds(pid) - c0) / el
	r.rtCPU = (cpuSeconds(rtPid) - rc0) / el
	r.minflt = (minorFaults(pid) - f0) / el
	r.last = sampleMem(pid)
	r.rssMB = max(r.rssMB, r.last.rss)
	r.load = loadavg()
	if traceLog != "" {
		if b, err := os.ReadFile(traceLog); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "start-up memory") {
					fmt.Println("  agent log:", l)
				}
			}
		}
	}
	if err := deleteAll(cs, idleNS); err != nil {
		return r, err
	}
	return r, nil
}

// podTimes are one pod's create call and the watch event that showed it Ready.
type podTimes struct {
	name           string
	created, ready time.Time
}

func startups(ts []podTimes) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.ready.Sub(t.created)
	}
	return out
}

// startPods creates count pods on node in ns (all at once, or each after the previous is
// Ready) and returns each pod's create and Ready times as a watch sees them.
func startPods(cs *kubernetes.Clientset, ns, node string, count int, serial bool) ([]podTimes, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	ready := map[string]time.Time{}
	readyCh := make(chan string, count)
	failed := make(chan error, 1)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if ok && p.Status.Phase == corev1.PodFailed {
				select {
				case failed <- fmt.Errorf("pod %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message):
				default:
				}
			}
			if !ok || !podReady(p) {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, ok := created[p.Name]; ok {
				if _, done := ready[p.Name]; !done {
					ready[p.Name] = now
					readyCh <- p.Name
				}
			}
			mu.Unlock()
		}
	}()
	create := func(i int) error {
		name := fmt.Sprintf("p%d", i)
		pod := podSpec(name, node)
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}
	if serial {
		for i := range count {
			if err := create(i); err != nil {
				return nil, err
			}
			select {
			case <-readyCh:
			case err := <-failed:
				return nil, err
			case <-ctx.Done():
				return nil, fmt.Errorf("pod %d not Ready", i)
			}
		}
	} else {
		errs := make(chan error, count)
		for i := range count {
			go func() { errs <- create(i) }()
		}
		for range count {
			if err := <-errs; err != nil {
				return nil, err
			}
		}
		for i := range count {
			select {
			case <-readyCh:
			case err := <-failed:
				return nil, err
			case <-ctx.Done():
				return nil, fmt.Errorf("%d of %d pods Ready", i, count)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]podTimes, 0, len(ready))
	for name, at := range ready {
		out = append(out, podTimes{name: name, created: created[name], ready: at})
	}
	return out, nil
}

func podSpec(name, node string) *corev1.Pod {
	grace := int64(1)
	f := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  &f,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "100000"}}},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteAll deletes the namespace's pods and waits until they are gone.
func deleteAll(cs *kubernetes.Clientset, ns string) error {
	ctx := context.Background()
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("pods of %s not gone after 5 minutes", ns)
}

func waitServer(kcfg string) (*kubernetes.Clientset, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if cfg, err := clientcmd.BuildConfigFromFlags("", kcfg); err == nil {
			cfg.QPS, cfg.Burst = 500, 1000
			if cs, err := kubernetes.NewForConfig(cfg); err == nil {
				if _, err := cs.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
					return cs, nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("kube server not ready")
}

func waitNodeReady(cs *kubernetes.Clientset, node string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{}); err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready after %s", node, d)
}

func readPids(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) == 2 {
			out[fs[0]], _ = strconv.Atoi(fs[1])
		}
	}
	return out, s.Err()
}

// cpuSeconds is the process's own user+system CPU (children excluded).
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fs := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(fs[11], 64)
	st, _ := strconv.ParseFloat(fs[12], 64)
	return (u + st) / 100 // USER_HZ
}

// statusMB is a kB field of /proc/<pid>/status in MB.
func statusMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// breakdown prints where ns's startups went, from the agent's "pod startup" log lines
// (unix milliseconds of each step) and the bench's own create and Ready times.
func breakdown(traceLog, ns string, times []podTimes) {
	if traceLog == "" {
		return
	}
	b, err := os.ReadFile(traceLog)
	if err != nil {
		fmt.Println("  no breakdown:", err)
		return
	}
	traces := map[string]map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="pod startup"`) || !strings.Contains(line, " pod="+ns+"/") {
			continue
		}
		f := map[string]float64{}
		name := ""
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			if k == "pod" {
				name = strings.TrimPrefix(v, ns+"/")
				continue
			}
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				f[k] = x
			}
		}
		traces[name] = f
	}
	steps := []struct{ name, from, to string }{
		{"create call → agent sees the pod", "created", "seen"},
		{"seen → RunPodSandbox (pending status, volumes, cgroup)", "seen", "sandbox"},
		{"RunPodSandbox", "sandbox", "sandboxDone"},
		{"sandbox → CreateContainer (status, image, env)", "sandboxDone", "create"},
		{"CreateContainer", "create", "createDone"},
		{"StartContainer", "createDone", "startDone"},
		{"started → Ready written", "startDone", "readyWritten"},
		{"Ready written → bench's watch sees it", "readyWritten", "ready"},
		{"total", "created", "ready"},
	}
	cols := make([][]time.Duration, len(steps))
	writes := 0.0
	for _, t := range times {
		f, ok := traces[t.name]
		if !ok {
			continue
		}
		f["created"] = float64(t.created.UnixMicro()) / 1e3
		f["ready"] = float64(t.ready.UnixMicro()) / 1e3
		writes += f["statusWrites"]
		for i, s := range steps {
			cols[i] = append(cols[i], time.Duration((f[s.to]-f[s.from])*float64(time.Millisecond)))
		}
	}
	if len(cols[0]) == 0 {
		fmt.Println("  no pod startup lines in", traceLog)
		return
	}
	fmt.Printf("  %-56s %9s %9s %9s  (%d pods, %.1f status writes each)\n", "step", "p50", "p99", "mean", len(cols[0]), writes/float64(len(cols[0])))
	for i, s := range steps {
		var sum time.Duration
		for _, d := range cols[i] {
			sum += d
		}
		fmt.Printf("  %-56s %9s %9s %9s\n", s.name, pct(cols[i], 0.5), pct(cols[i], 0.99), (sum / time.Duration(len(cols[i]))).Round(time.Millisecond))
	}
}
