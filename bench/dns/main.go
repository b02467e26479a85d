// Command dns measures the node-local cluster DNS (internal/agent/dns) dnsperf-style:
// queries per second and latency percentiles for cached Service names.
//
// It runs the DNS server in a child process of its own (GOMAXPROCS=1, pinned to one CPU
// with taskset when -cpu is set) over an index of -services Services, and a Go load
// generator here (another CPU) that keeps -inflight queries outstanding over UDP for
// -duration, each worker on its own socket, asking random names among the Services.
// Output: one JSON line.
//
//	go run ./bench/dns -services 1000 -inflight 64 -duration 20s -cpu 0 -client-cpu 1
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentdns "kubeos.dev/kube/internal/agent/dns"

	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	serve := flag.Bool("serve", false, "run the server (child mode): print its address, answer until stdin closes")
	services := flag.Int("services", 1000, "Services in the index")
	inflight := flag.Int("inflight", 64, "outstanding queries")
	duration := flag.Duration("duration", 20*time.Second, "measuring time (after 2 s of warm-up)")
	cpu := flag.String("cpu", "", "CPU list the server is pinned to (taskset -c); empty: not pinned")
	clientCPU := flag.String("client-cpu", "", "CPU list the load generator is pinned to")
	metrics := flag.Bool("metrics", true, "count CoreDNS metrics in the server (as the agent does)")
	profile := flag.String("cpuprofile", "", "write the server's CPU profile here")
	echo := flag.Bool("echo", false, "the server is a bare UDP echo loop instead (the sockets' ceiling on this machine)")
	flag.Parse()
	if *serve {
		if *profile != "" {
			f, err := os.Create(*profile)
			if err == nil {
				_ = pprof.StartCPUProfile(f)
				defer pprof.StopCPUProfile()
			}
		}
		run := func() error { return runServer(*services, *metrics) }
		if *echo {
			run = runEcho
		}
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *clientCPU != "" {
		pinSelf(*clientCPU)
	}
	if err := runClient(*services, *inflight, *duration, *cpu, *metrics, *profile, *echo); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func pinSelf(cpus string) {
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "taskset: %v: %s\n", err, out)
	}
}

func name(i int) string { return fmt.Sprintf("svc-%d.bench.svc.cluster.local.", i) }

func runServer(n int, withMetrics bool) error {
	runtime.GOMAXPROCS(1)
	idx := agentdns.NewIndex()
	idx.SetNamespace("bench")
	for i := range n {
		idx.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	}
	h := &agentdns.Handler{Resolver: &agentdns.Resolver{Zone: "cluster.local.", Index: idx}, Server: "dns://bench"}
	if withMetrics {
		m, err := agentdns.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			return err
		}
		h.Metrics = m
	}
	l, err := agentdns.Listen("127.0.0.1:0", h)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		cancel()
	}()
	fmt.Println(l.Addr().String())
	return l.Serve(ctx)
}

// runEcho answers every packet with itself from one goroutine: what one core does with
// the same sockets and no DNS work.
func runEcho() error {
	runtime.GOMAXPROCS(1)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		pc.Close()
	}()
	fmt.Println(pc.LocalAddr().String())
	buf := make([]byte, 1500)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return nil
		}
		_, _ = pc.WriteTo(buf[:n], addr)
	}
}

type result struct {
	Services   int     `json:"services"`
	Inflight   int     `json:"inflight"`
	Seconds    float64 `json:"seconds"`
	Queries    int     `json:"queries"`
	QPS        float64 `json:"qps"`
	Timeouts   int     `json:"timeouts"`
	Errors     int     `json:"errors"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	P999ms     float64 `json:"p999_ms"`
	ServerCPU  string  `json:"server_cpu"`
	ClientCPU  int     `json:"client_gomaxprocs"`
	Metrics    bool    `json:"metrics"`
	Echo       bool    `json:"echo"`
	ServerCPUs float64 `json:"server_cpu_seconds"`
}

func runClient(n, inflight int, d time.Duration, cpu string, withMetrics bool, profile string, echo bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"-serve", "-services", strconv.Itoa(n), "-metrics=" + strconv.FormatBool(withMetrics), "-cpuprofile", profile, "-echo=" + strconv.FormatBool(echo)}
	var cmd *exec.Cmd
	if cpu != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpu, self}, args...)...)
	} else {
		cmd = exec.Command(self, args...)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; stdin.Close(); os.Exit(1) }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	addr = strings.TrimSpace(addr)

	// Pre-packed queries, one per Service name; the ID is patched per send.
	queries := make([][]byte, n)
	for i := range n {
		m := new(dns.Msg)
		m.SetQuestion(name(i), dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			return err
		}
		queries[i] = b
	}
	var (
		mu        sync.Mutex
		lat       []time.Duration
		timeouts  int
		errs      int
		measuring = make(chan struct{})
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("udp", addr)
			if err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
				return
			}
			defer conn.Close()
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			buf := make([]byte, 1500)
			q := make([]byte, 512)
			var mine []time.Duration
			var myTimeouts, myErrs int
			id := uint16(w << 8)
			for {
				select {
				case <-stop:
					mu.Lock()
					lat = append(lat, mine...)
					timeouts += myTimeouts
					errs += myErrs
					mu.Unlock()
					return
				default:
				}
				on := false
				select {
				case <-measuring:
					on = true
				default:
				}
				src := queries[rnd.IntN(n)]
				q = append(q[:0], src...)
				id++
				binary.BigEndian.PutUint16(q, id)
				start := time.Now()
				if _, err := conn.Write(q); err != nil {
					myErrs++
					continue
				}
				_ = conn.SetReadDeadline(start.Add(time.Second))
				for {
					k, err := conn.Read(buf)
					if err != nil {
						if on {
							myTimeouts++
						}
						break
					}
					if k < 12 || binary.BigEndian.Uint16(buf) != id {
						continue // a late answer to a timed-out query
					}
					if buf[3]&0x0f != 0 { // rcode
						myErrs++
					}
					if on {
						mine = append(mine, time.Since(start))
					}
					break
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	usage0 := childCPU(cmd.Process.Pid)
	close(measuring)
	t0 := time.Now()
	time.Sleep(d)
	usage1 := childCPU(cmd.Process.Pid)
	close(stop)
	elapsed := time.Since(t0)
	wg.Wait()
	stdin.Close()
	_ = cmd.Wait()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	r := result{Services: n, Inflight: inflight, Seconds: elapsed.Seconds(), Queries: len(lat), QPS: float64(len(lat)) / elapsed.Seconds(),
		Timeouts: timeouts, Errors: errs, P50ms: pct(0.5), P99ms: pct(0.99), P999ms: pct(0.999), ServerCPU: cpu,
		ClientCPU: runtime.GOMAXPROCS(0), Metrics: withMetrics, Echo: echo, ServerCPUs: usage1 - usage0}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// childCPU is the CPU seconds (user+system) the server process used so far (its pid, or
// taskset's child when pinned: taskset execs, so the pid is the server's).
func childCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
