// Command gateway measures the Route gateway's data plane (internal/gateway): an upstream
// HTTP server (net/http, a 64-byte answer) and the gateway each run in a child process of
// this binary, the load generator in the parent, all on loopback. The gateway's table is
// compiled from a Route (one of ROUTES, the others only there to be matched past) whose
// backend is the upstream's address in an EndpointSlice — the same table the agent builds
// from the API.
//
// Measured, direct to the upstream and through the gateway, alternating, ROUNDS times:
//   - closed loop: CONNS keep-alive connections sending as fast as answers come, for
//     DURATION → requests/s, and the ratio gateway ÷ direct (goal ≥ 0.8);
//   - open loop: RATE requests/s on schedule for DURATION → p50/p99 latency, and the p99
//     added by the gateway (goal ≤ 1 ms at 1,000/s).
//
// Prints one JSON line per round and a summary.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/gateway"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func main() {
	role := flag.String("role", "", "(internal) upstream | gateway")
	upstream := flag.String("upstream", "", "(gateway child) the upstream's host:port")
	routes := flag.Int("routes", 100, "Routes in the table (hostnames r0.bench … ; the measured one is the last)")
	conns := flag.Int("conns", 32, "closed loop: concurrent keep-alive connections")
	duration := flag.Duration("duration", 10*time.Second, "each measurement's length")
	rate := flag.Int("rate", 1000, "open loop: requests per second")
	rounds := flag.Int("rounds", 3, "rounds (direct and gateway in each, alternating which goes first)")
	profile := flag.String("cpuprofile", "", "write the gateway child's CPU profile here")
	flag.Parse()
	switch *role {
	case "upstream":
		serveUpstream()
		return
	case "gateway":
		serveGateway(*upstream, *routes, *profile)
		return
	}
	up, stopUp := child("-role=upstream")
	defer stopUp()
	gw, stopGw := child("-role=gateway", "-upstream="+up, "-routes="+strconv.Itoa(*routes), "-cpuprofile="+*profile)
	defer stopGw()
	host := fmt.Sprintf("r%d.bench", *routes-1)
	targets := map[string]target{"direct": {addr: up, host: "upstream"}, "gateway": {addr: gw, host: host}}
	if _, err := once(targets["gateway"]); err != nil {
		log.Fatalf("through the gateway: %v", err)
	}
	type sum struct{ rps, p50, p99 []float64 }
	sums := map[string]*sum{"direct": {}, "gateway": {}}
	for r := range *rounds {
		order := []string{"direct", "gateway"}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			t := targets[name]
			rps := closedLoop(t, *conns, *duration)
			p50, p99 := openLoop(t, *rate, *duration)
			s := sums[name]
			s.rps, s.p50, s.p99 = append(s.rps, rps), append(s.p50, p50), append(s.p99, p99)
			line, _ := json.Marshal(map[string]any{"round": r, "target": name, "rps": int(rps), "conns": *conns,
				"rate": *rate, "p50_ms": p50, "p99_ms": p99})
			fmt.Println(string(line))
		}
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	d, g := sums["direct"], sums["gateway"]
	out, _ := json.Marshal(map[string]any{"summary": true, "routes": *routes, "rounds": *rounds,
		"direct_rps": int(med(d.rps)), "gateway_rps": int(med(g.rps)), "ratio": round3(med(g.rps) / med(d.rps)),
		"direct_p50_ms": med(d.p50), "gateway_p50_ms": med(g.p50), "direct_p99_ms": med(d.p99), "gateway_p99_ms": med(g.p99),
		"added_p99_ms": round3(med(g.p99) - med(d.p99))})
	fmt.Println(string(out))
}

type target struct{ addr, host string }

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// child starts this binary with args; it prints its listen address on its first line.
func child(args ...string) (string, func()) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatalf("%v: %v", args, err)
	}
	return strings.TrimSpace(line), func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
}

var body = []byte(strings.Repeat("x", 63) + "\n")

func serveUpstream() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Addr())
	log.Fatal(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})))
}

// serveGateway serves a table of n Routes; the last one's backend is the upstream.
func serveGateway(upstream string, n int, profile string) {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		// The parent ends the child with SIGTERM; the profile is written then.
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() { <-c; pprof.StopCPUProfile(); f.Close(); os.Exit(0) }()
	}
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		log.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	in := gateway.Input{}
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		in.Routes = append(in.Routes, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(i), 0))},
			Spec: v1alpha1.RouteSpec{Hostnames: []string{name + ".bench"}, Rules: []v1alpha1.RouteRule{
				{Matches: []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathPrefix, Value: "/api"}},
					{Headers: []v1alpha1.ValueMatch{{Name: "X-Canary", Value: "1"}}}}, Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 80}}},
				{Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 80}}}}}})
	}
	in.Services = []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}}
	in.EndpointSlices = []*discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "web-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(p))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}}}}}
	g, err := gateway.New(gateway.Options{})
	if err != nil {
		log.Fatal(err)
	}
	t := gateway.Compile(in)
	if len(t.Problems) > 0 {
		log.Fatal(t.Problems)
	}
	g.Swap(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Addr())
	log.Fatal((&http.Server{Handler: g}).Serve(l))
}

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

func do(c *http.Client, t target) error {
	req, _ := http.NewRequest(http.MethodGet, "http://"+t.addr+"/", nil)
	req.Host = t.host
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

func once(t target) (time.Duration, error) {
	start := time.Now()
	err := do(newClient(1), t)
	return time.Since(start), err
}

// closedLoop is requests/s with conns connections each sending as soon as answered.
func closedLoop(t target, conns int, d time.Duration) float64 {
	c := newClient(conns)
	var n, errs atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := do(c, t); err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if errs.Load() > 0 {
		log.Printf("%s: %d errors", t.host, errs.Load())
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}

// openLoop sends rate requests/s on schedule (each from its own goroutine, over a pool of
// keep-alive connections) and returns p50 and p99 latency in ms, measured from the
// scheduled send time (so queueing counts).
func openLoop(t target, rate int, d time.Duration) (float64, float64) {
	c := newClient(256)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	interval := time.Second / time.Duration(rate)
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(w):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := do(c, t); err != nil {
				return
			}
			ms := float64(time.Since(at).Microseconds()) / 1000
			mu.Lock()
			lat = append(lat, ms)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, 0
	}
	q := func(p float64) float64 { return round3(lat[min(len(lat)-1, int(p*float64(len(lat))))]) }
	return q(0.50), q(0.99)
}
