// Command proxy measures the agent's Service proxy (internal/agent/proxy) programming
// nftables: an in-process kube server (no agent) holds SERVICES ClusterIP Services without
// selectors, each with one EndpointSlice of ENDPOINTS addresses written by the bench; the
// proxy runs in a child process of this binary (so its CPU is its own) on a table and
// Service CIDR of its own in the host's network namespace, and reports each sync's
// completion (rules in the kernel: the netlink transaction returned) on stdout. Measured:
// the initial programming of everything, then RATE EndpointSlice changes per second (one
// endpoint address replaced) for DURATION: p50/p99/max from just before the API write to the
// sync that carried it into the kernel, and the proxy process's CPU during the churn.
// Prints one JSON line. Needs root (CAP_NET_ADMIN) and nf_tables; cleans up its table and
// routes at the end.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/agent/proxy"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

const ns = "bench-proxy"

func main() {
	child := flag.Bool("child", false, "(internal) run the proxy and report syncs")
	kubeconfig := flag.String("kubeconfig", "", "(child) kubeconfig")
	services := flag.Int("services", 1000, "Services")
	endpoints := flag.Int("endpoints", 10, "endpoints per Service")
	rate := flag.Float64("rate", 100, "EndpointSlice changes per second while measuring")
	duration := flag.Duration("duration", 30*time.Second, "how long the churn lasts")
	peer := flag.String("kube-proxy", "", "run this upstream kube-proxy binary (nftables mode, table ip kube-proxy) instead of Kube's proxy")
	peerArgs := flag.String("kube-proxy-args", "", "extra kube-proxy flags, space-separated (e.g. --min-sync-period=0s)")
	flag.Parse()
	pid := os.Getpid()
	table := fmt.Sprintf("kb%d", pid)
	serviceCIDR := fmt.Sprintf("10.%d.0.0/16", 200+pid%20)
	if *child {
		runChild(*kubeconfig, os.Getenv("BENCH_TABLE"), os.Getenv("BENCH_CIDR"))
		return
	}
	dir, err := os.MkdirTemp("", "bench-proxy-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := servertest.StartWith(filepath.Join(dir, "server"), nil, func(o *server.Options) { o.ServiceClusterIPRange = serviceCIDR })
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	defer proxy.Cleanup(context.Background(), table, serviceCIDR)
	// Interrupted: the child goes, the table and routes too.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = proxy.Cleanup(context.Background(), table, serviceCIDR)
		os.Exit(2)
	}()
	cfg, _ := srv.Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	// Services and slices, 16 writers.
	setup := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}, Spec: corev1.ServiceSpec{
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
				if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					log.Fatal(err)
				}
				if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(i, *endpoints, 0), metav1.CreateOptions{}); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	for i := 0; i < *services; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	setupTook := time.Since(setup)

	// The proxy, as its own process.
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, mustRead(srv.Kubeconfig), 0o600); err != nil {
		log.Fatal(err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "-child", "-kubeconfig", kc)
	cmd.Env = append(os.Environ(), "BENCH_TABLE="+table, "BENCH_CIDR="+serviceCIDR)
	events := make(chan proxy.SyncEvent, 1000)
	if *peer != "" {
		peerServices = *services
		// kube-proxy waits up to 30 s for its Node before it programs anything: give it one.
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}}, metav1.CreateOptions{}); err != nil {
			log.Fatal(err)
		}
		cmd = peerCommand(*peer, kc, strings.Fields(*peerArgs))
		defer peerCleanup()
		if err := watchPeer(events); err != nil {
			log.Fatal(err)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if *peer == "" {
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				var e proxy.SyncEvent
				if json.Unmarshal(sc.Bytes(), &e) == nil {
					events <- e
				}
			}
			close(events)
		}()
	} else {
		go func() { _, _ = io.Copy(io.Discard, out) }()
	}
	seen := 0
	var initial time.Duration
	for seen < *services {
		e, ok := <-events
		if !ok {
			log.Fatal("proxy exited")
		}
		seen += len(e.Services)
		initial = e.At.Sub(start)
	}
	cpu0 := cpuSeconds(cmd.Process.Pid)

	// Churn: RATE changes per second, each to a random-ish Service, round robin.
	var mu sync.Mutex
	pending := map[string]time.Time{} // service → write returned (first unsynced)
	var lat, took []time.Duration
	// The server's own delay: a watch of the slices in this process, from the write's
	// return to the event (what no proxy can beat).
	watchPending := map[string]time.Time{}
	var watchLat []time.Duration
	w, err := cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			key := ns + "/" + sl.Labels[discoveryv1.LabelServiceName]
			mu.Lock()
			if t, ok := watchPending[key]; ok {
				watchLat = append(watchLat, time.Since(t))
				delete(watchPending, key)
			}
			mu.Unlock()
		}
	}()
	churnDone := make(chan struct{})
	go func() {
		for e := range events {
			mu.Lock()
			if e.Took > 0 {
				took = append(took, e.Took)
			}
			for _, s := range e.Services {
				if t, ok := pending[s]; ok {
					lat = append(lat, e.At.Sub(t))
					delete(pending, s)
				}
			}
			mu.Unlock()
		}
	}()
	changes := int(*rate * duration.Seconds())
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	churnStart := time.Now()
	go func() {
		defer close(churnDone)
		for n := 0; n < changes; n++ {
			<-tick.C
			i := (n * 7919) % *services
			key := fmt.Sprintf("%s/s%d", ns, i)
			go func(n, i int) {
				// Timed from just before the write is sent: a sync (or the watch event) can
				// come before the write's answer is read, which left a change pending until
				// its Service's next change when timed from the answer.
				mu.Lock()
				sent := time.Now()
				if _, ok := pending[key]; !ok {
					pending[key] = sent
				}
				if _, ok := watchPending[key]; !ok {
					watchPending[key] = sent
				}
				mu.Unlock()
				if _, err := cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice(i, *endpoints, n+1), metav1.UpdateOptions{}); err != nil {
					log.Printf("update: %v", err)
				}
			}(n, i)
		}
	}()
	<-churnDone
	tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		left := len(pending)
		mu.Unlock()
		if left == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	churnTook := time.Since(churnStart)
	cpu1 := cpuSeconds(cmd.Process.Pid)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	slices.Sort(took)
	slices.Sort(watchLat)
	pctOf := func(l []time.Duration, p float64) float64 {
		if len(l) == 0 {
			return 0
		}
		return l[min(len(l)-1, int(p*float64(len(l))))].Seconds() * 1000
	}
	pct := func(p float64) float64 { return pctOf(lat, p) }
	res := map[string]any{
		"services": *services, "endpoints": *endpoints, "setup_s": setupTook.Seconds(),
		"initial_programming_s": initial.Seconds(), "rate": *rate, "changes": changes, "synced": len(lat), "missed": len(pending),
		"p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": pct(1), "proxy_cpu_cores": (cpu1 - cpu0) / churnTook.Seconds(),
		"churn_s": churnTook.Seconds(), "proxy_cpu_s": cpu1 - cpu0, "proxy_cpu_ms_per_change": (cpu1 - cpu0) * 1000 / float64(max(1, len(lat))),
		"sync_p50_ms": pctOf(took, 0.5), "sync_p99_ms": pctOf(took, 0.99), "syncs": len(took),
		"watch_p50_ms": pctOf(watchLat, 0.5), "watch_p99_ms": pctOf(watchLat, 0.99),
		"proxy": map[bool]string{true: "kube-proxy " + *peer + " " + *peerArgs, false: "internal/agent/proxy"}[*peer != ""],
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// slice is Service i's EndpointSlice at generation gen: n addresses, the first replaced per
// generation.
func slice(i, n, gen int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d-1", i), Labels: map[string]string{
			discoveryv1.LabelServiceName: fmt.Sprintf("s%d", i), discoveryv1.LabelManagedBy: "bench-proxy"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for e := 0; e < n; e++ {
		host := e
		if e == 0 && gen > 0 {
			// never the created address again (gen%150 == 0 gave it back: a change that
			// changed nothing, so no sync, and a 10 s "latency" until the next change)
			host = 101 + gen%149
		} else if e == 0 {
			host = 100
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.250.%d.%d", i%250, host+1)},
			NodeName: ptr.To("elsewhere"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func runChild(kubeconfig, table, cidr string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	enc := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	px, err := proxy.New(proxy.Options{Client: kubernetes.NewForConfigOrDie(cfg), NodeName: "bench-node", Table: table,
		ServiceCIDR: cidr, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Synced: func(e proxy.SyncEvent) { mu.Lock(); _ = enc.Encode(e); mu.Unlock() }})
	if err != nil {
		log.Fatal(err)
	}
	if err := px.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func mustRead(p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	// utime, stime and the waited-for children's cutime, cstime: kube-proxy programs
	// through `nft -f`, a child process per sync.
	var sum float64
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum / 100 // USER_HZ
}
