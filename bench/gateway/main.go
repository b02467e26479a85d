// Command gateway measures the Route gateway's data plane (internal/gateway) against the
// direct paths it replaces. An upstream HTTP server (net/http, a 64-byte answer) and the
// gateway each run in a child process of this binary, the load generator in the parent.
// The gateway's table is compiled from ROUTES Routes (the measured one last, the others
// only there to be matched past) whose backend is the upstream's address in an
// EndpointSlice — the table the agent builds from the API — and it writes its access log
// as the agent does by default (--gateway-access-log, to a file here).
//
// Targets (-targets):
//   - endpoint: the load generator straight to the upstream's address (the pod IP);
//   - service: to the Service's ClusterIP, programmed by Kube's own Service proxy
//     (internal/agent/proxy: nftables DNAT to the endpoint) — what "direct to the Service"
//     means on a Kube node. Needs root (CAP_NET_ADMIN) and nf_tables;
//   - gateway: through the gateway to the endpoint.
//
// Isolation: with -netns (the default when root) the whole run re-executes itself in a
// network namespace of its own (`unshare --net`): lo with the pod address 10.1.0.1, the
// ClusterIP 10.96.0.10, its nftables table and routes exist only there and vanish with
// the process — no side effects on the machine, and no other process's nftables rules on
// the packets' path. With -pin-load and -pin-gateway (CPU lists) the load generator and
// upstream run on one set of cores and the gateway on another (`taskset`); every target
// is measured with the same pinning.
//
// Measured for each target, alternating the order every round, ROUNDS times:
//   - closed loop: for each of CONNS (a list) keep-alive connections sending as fast as
//     answers come, for DURATION → requests/s, and the ratios to the direct targets (goal:
//     gateway ≥ 0.8× direct);
//   - open loop: RATE requests/s on schedule for DURATION → p50/p99 latency, and the p99
//     the gateway adds (goal ≤ 1 ms at 1,000/s);
//   - CPU: each child's user+system time over each measurement (/proc/PID/stat) divided
//     by the requests answered → µs per request of the gateway, the upstream and the load
//     generator (this process); the summary adds them up per target (total_cpu_us: what
//     the 2 cores must do per request; server_cpu_us: without the generator) and gives
//     the ratios direct ÷ gateway of both — the requests/s ratio the CPU allows when every
//     process shares the same cores, and the servers' cost with the client left out.
//
// Prints one JSON line per measurement and a JSON summary (medians over the rounds).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	routes     int
	conns      []int
	duration   time.Duration
	rate       int
	rounds     int
	profile    string
	targets    []string
	accessLog  bool
	netns      bool
	pinLoad    string
	pinGateway string
}

func main() {
	role := flag.String("role", "", "(internal) upstream | gateway")
	listen := flag.String("listen", "", "(internal) the child's listen host")
	upstream := flag.String("upstream", "", "(internal, gateway child) the upstream's host:port")
	accessFile := flag.String("access-file", "", "(internal, gateway child) the access log's file")
	var c config
	flag.IntVar(&c.routes, "routes", 100, "Routes in the table (hostnames r0.bench … ; the measured one is the last)")
	conns := flag.String("conns", "1,16,64", "closed loop: concurrent keep-alive connections (a comma-separated list)")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "each measurement's length")
	flag.IntVar(&c.rate, "rate", 1000, "open loop: requests per second")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds (every target in each, the order rotating)")
	flag.StringVar(&c.profile, "cpuprofile", "", "write the gateway child's CPU profile here")
	targets := flag.String("targets", "endpoint,service,gateway", "what to measure: endpoint, service (the ClusterIP; needs root), gateway")
	flag.BoolVar(&c.accessLog, "access-log", true, "the gateway writes its access log (as the agent's default) to a file")
	flag.BoolVar(&c.netns, "netns", os.Geteuid() == 0, "run in a network namespace of its own (unshare --net; needs root)")
	flag.StringVar(&c.pinLoad, "pin-load", "", "CPU list (taskset) for the load generator and the upstream, e.g. 0")
	flag.StringVar(&c.pinGateway, "pin-gateway", "", "CPU list (taskset) for the gateway, e.g. 1")
	flag.Parse()
	switch *role {
	case "upstream":
		serveUpstream(*listen)
		return
	case "gateway":
		serveGateway(*listen, *upstream, c.routes, c.profile, *accessFile)
		return
	}
	for _, s := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("-conns %q: not a list of positive numbers", *conns)
		}
		c.conns = append(c.conns, n)
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimSpace(t); t != "endpoint" && t != "service" && t != "gateway" {
			log.Fatalf("-targets: unknown %q", t)
		}
		c.targets = append(c.targets, strings.TrimSpace(t))
	}
	// Re-run in the namespace and on the load's cores; the children get their own pinning.
	if reexec(c) {
		return
	}
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

// result is one measurement.
type result struct {
	Round   int     `json:"round"`
	Target  string  `json:"target"`
	Mode    string  `json:"mode"` // closed | open
	Conns   int     `json:"conns,omitempty"`
	Rate    int     `json:"rate,omitempty"`
	RPS     float64 `json:"rps"`
	P50     float64 `json:"p50_ms,omitempty"`
	P99     float64 `json:"p99_ms,omitempty"`
	Errors  int64   `json:"errors,omitempty"`
	GwCPU   float64 `json:"gateway_cpu_us_per_req,omitempty"`
	UpCPU   float64 `json:"upstream_cpu_us_per_req"`
	LoadCPU float64 `json:"generator_cpu_us_per_req"`
}

func run(c config) error {
	env, err := setup(c)
	if err != nil {
		return err
	}
	defer env.stop()
	var all []result
	for r := range c.rounds {
		order := slices.Clone(env.targets)
		for range r % len(order) {
			order = append(order[1:], order[0])
		}
		for _, name := range order {
			t := env.byName[name]
			for _, n := range c.conns {
				res := env.measure(t, func() (float64, float64, float64, int64, int64) {
					rps, n2, errs := closedLoop(t, n, c.duration)
					return rps, 0, 0, n2, errs
				})
				res.Round, res.Mode, res.Conns = r, "closed", n
				all = append(all, res)
				printJSON(res)
			}
			res := env.measure(t, func() (float64, float64, float64, int64, int64) {
				p50, p99, n2, errs := openLoop(t, c.rate, c.duration)
				return float64(n2) / c.duration.Seconds(), p50, p99, n2, errs
			})
			res.Round, res.Mode, res.Rate = r, "open", c.rate
			all = append(all, res)
			printJSON(res)
		}
	}
	printJSON(summarize(c, env, all))
	return nil
}

func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// totalCPU is a measurement's CPU per request in all three processes; serverCPU leaves the
// load generator out.
func totalCPU(r result) float64 { return r.GwCPU + r.UpCPU + r.LoadCPU }

func serverCPU(r result) float64 { return r.GwCPU + r.UpCPU }

// summarize takes the medians over the rounds per target and measurement.
func summarize(c config, env *environment, all []result) map[string]any {
	pick := func(target, mode string, conns int, f func(result) float64) float64 {
		var v []float64
		for _, r := range all {
			if r.Target == target && r.Mode == mode && r.Conns == conns {
				v = append(v, f(r))
			}
		}
		return round3(median(v))
	}
	out := map[string]any{"summary": true, "routes": c.routes, "rounds": c.rounds, "duration": c.duration.String(),
		"netns": env.netns, "pin_load": c.pinLoad, "pin_gateway": c.pinGateway, "access_log": c.accessLog,
		"gomaxprocs_gateway": env.gwProcs}
	rps := func(r result) float64 { return r.RPS }
	for _, t := range env.targets {
		for _, n := range c.conns {
			out[fmt.Sprintf("%s_rps_c%d", t, n)] = pick(t, "closed", n, rps)
		}
		out[t+"_p50_ms"] = pick(t, "open", 0, func(r result) float64 { return r.P50 })
		out[t+"_p99_ms"] = pick(t, "open", 0, func(r result) float64 { return r.P99 })
		out[t+"_upstream_cpu_us"] = pick(t, "open", 0, func(r result) float64 { return r.UpCPU })
		for _, n := range c.conns {
			out[fmt.Sprintf("%s_total_cpu_us_c%d", t, n)] = pick(t, "closed", n, totalCPU)
			out[fmt.Sprintf("%s_server_cpu_us_c%d", t, n)] = pick(t, "closed", n, serverCPU)
		}
	}
	if _, ok := env.byName["gateway"]; ok {
		for _, n := range c.conns {
			out[fmt.Sprintf("gateway_cpu_us_c%d", n)] = pick("gateway", "closed", n, func(r result) float64 { return r.GwCPU })
		}
		out["gateway_cpu_us_open"] = pick("gateway", "open", 0, func(r result) float64 { return r.GwCPU })
		for _, d := range []string{"endpoint", "service"} {
			if _, ok := env.byName[d]; !ok {
				continue
			}
			for _, n := range c.conns {
				if base := pick(d, "closed", n, rps); base > 0 {
					out[fmt.Sprintf("ratio_vs_%s_c%d", d, n)] = round3(pick("gateway", "closed", n, rps) / base)
				}
			}
			// What the CPU allows: the whole path's CPU per request (generator, upstream and
			// gateway: on 2 shared cores, the ratio requests/s tends to when all are busy), and
			// the servers' alone (upstream, and the gateway; the client is not the system's).
			for _, n := range c.conns {
				if g := pick("gateway", "closed", n, totalCPU); g > 0 {
					out[fmt.Sprintf("cpu_ratio_vs_%s_c%d", d, n)] = round3(pick(d, "closed", n, totalCPU) / g)
				}
				if g := pick("gateway", "closed", n, serverCPU); g > 0 {
					out[fmt.Sprintf("server_cpu_ratio_vs_%s_c%d", d, n)] = round3(pick(d, "closed", n, serverCPU) / g)
				}
			}
			out["added_p99_ms_vs_"+d] = round3(pick("gateway", "open", 0, func(r result) float64 { return r.P99 }) -
				pick(d, "open", 0, func(r result) float64 { return r.P99 }))
		}
	}
	return out
}
