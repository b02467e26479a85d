// Command apf measures API priority and fairness under overload (issue 21, performance): a
// low-priority user (a ServiceAccount outside kube-system: FlowSchema service-accounts →
// workload-low) first runs a closed loop of mixed reads and writes to find the sustained
// rate, then offers 10× that rate open-loop, while two probes ask for one ConfigMap 20 times a
// second each: the exempt level (the admin kubeconfig, system:masters) and workload-high (a
// ServiceAccount in kube-system: FlowSchema kube-system-service-accounts). It reports the
// probes' p50/p99 unloaded and under the overload, how the overload's requests were answered
// (200, 429, other) and the server's RSS (and CPU) over each phase when -pid names it (a
// comma-separated list is summed: kube-apiserver and its etcd), and this program's own CPU
// (the load shares the machine with the server).
//
// Requests are raw HTTP through client-go's transport (rest.HTTPClientFor), so client-go's
// own retry of 429s does not hide them. The same program measures Kube and kube-apiserver.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof" // -debug-addr
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const ns = "apf-bench"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the server's admin kubeconfig")
	name := flag.String("name", "server", "label for the results")
	pid := flag.String("pid", "", "the server's pid, or pids separated by commas, summed (RSS and CPU per phase; empty: not read)")
	workers := flag.Int("workers", 16, "closed-loop workers that find the sustained rate")
	factor := flag.Float64("factor", 10, "the overload, as a multiple of the sustained rate")
	phase := flag.Duration("phase", 20*time.Second, "length of each phase")
	maxInFlight := flag.Int("max-inflight", 4096, "the overload's cap on requests in flight (beyond it an offered request is counted as not sent)")
	separate := flag.Bool("separate-load", true, "run the load in a child process of its own (false: in this process, beside the probes)")
	loadProcessMode := flag.Bool("load-process", false, "internal: be the load process (commands on stdin, results on stdout)")
	debugAddr := flag.String("debug-addr", "", "serve this program's /debug/pprof on this address (e.g. 127.0.0.1:6061) to see where the load waits")
	flag.Parse()
	if *debugAddr != "" {
		go func() { fmt.Fprintln(os.Stderr, "apf: debug server:", http.ListenAndServe(*debugAddr, nil)) }()
	}
	var pids []int
	for _, f := range strings.FieldsFunc(*pid, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apf: -pid:", err)
			os.Exit(2)
		}
		pids = append(pids, n)
	}
	if *loadProcessMode {
		if err := loadProcessMain(*kubeconfig, *maxInFlight); err != nil {
			fmt.Fprintln(os.Stderr, "apf load process:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*kubeconfig, *name, pids, *workers, *factor, *phase, *maxInFlight, *separate); err != nil {
		fmt.Fprintln(os.Stderr, "apf:", err)
		os.Exit(1)
	}
}

type target struct {
	http *http.Client
	host string
}

func (t target) do(ctx context.Context, method, path string, body []byte, ct string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.host+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// newTarget is a client of its own: a transport (and so HTTP/2 connections) not shared with
// the other targets, as separate processes would have. client-go caches transports by TLS
// configuration and adds a bearer token above the cache, so two ServiceAccounts' configs
// would otherwise share one connection pool; a Proxy function (returning no proxy) makes the
// transport uncacheable.
func newTarget(cfg *rest.Config) (target, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return target{}, err
	}
	hc.Timeout = 70 * time.Second
	return target{http: hc, host: strings.TrimSuffix(cfg.Host, "/")}, nil
}

// tokenConfig is cfg with a fresh token of ServiceAccount saNS/sa instead of the admin's
// credential.
func tokenConfig(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config, saNS, sa string) (*rest.Config, error) {
	if _, err := cs.CoreV1().ServiceAccounts(saNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "apf-bench-" + saNS + "-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: saNS, Name: sa}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(saNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	out := rest.AnonymousClientConfig(cfg)
	out.BearerToken = tr.Status.Token
	return out, nil
}

// mixed is one request of the load's mix: 80 % get, 10 % list of 100, 10 % merge patch.
func mixed(ctx context.Context, t target, i int) (int, error) {
	cm := fmt.Sprintf("/api/v1/namespaces/%s/configmaps/cm-%d", ns, i%100)
	switch i % 10 {
	case 0:
		return t.do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps?limit=100", nil, "")
	case 1:
		return t.do(ctx, http.MethodPatch, cm, []byte(`{"data":{"n":"`+strconv.Itoa(i)+`"}}`), "application/merge-patch+json")
	default:
		return t.do(ctx, http.MethodGet, cm, nil, "")
	}
}

type probe struct {
	mu  sync.Mutex
	lat []time.Duration
	bad atomic.Int64
}

func (p *probe) run(ctx context.Context, t target, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		code, err := t.do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps/cm-0", nil, "")
		if ctx.Err() != nil {
			return
		}
		if err != nil || code != http.StatusOK {
			p.bad.Add(1)
			continue
		}
		p.mu.Lock()
		p.lat = append(p.lat, time.Since(start))
		p.mu.Unlock()
	}
}

func (p *probe) quantiles() (p50, p99 float64, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lat) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), p.lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(f float64) float64 {
		return float64(s[min(len(s)-1, int(f*float64(len(s))))].Microseconds()) / 1000
	}
	return q(0.50), q(0.99), len(s)
}

// proc samples the server's RSS and CPU, summed over its processes.
type proc struct {
	pids   []int
	mu     sync.Mutex
	minRSS int64
	maxRSS int64
}

func (p *proc) rss() int64 {
	var sum int64
	for _, pid := range p.pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				sum += kb / 1024
			}
		}
	}
	return sum
}

func (p *proc) cpu() float64 {
	var sum float64
	for _, pid := range p.pids {
		sum += cpuSeconds(strconv.Itoa(pid))
	}
	return sum
}

// cpuSeconds is the user and system CPU time of process pid ("self": this one).
func cpuSeconds(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

func (p *proc) sample(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	p.mu.Lock()
	p.minRSS, p.maxRSS = 1<<62, 0
	p.mu.Unlock()
	for {
		if r := p.rss(); r > 0 {
			p.mu.Lock()
			p.minRSS, p.maxRSS = min(p.minRSS, r), max(p.maxRSS, r)
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

type phaseResult struct {
	Name              string  `json:"name"`
	Phase             string  `json:"phase"`
	OfferedPerSec     float64 `json:"offered_per_s,omitempty"`
	OKPerSec          float64 `json:"ok_per_s,omitempty"`
	Rejected429PerSec float64 `json:"429_per_s,omitempty"`
	OtherPerSec       float64 `json:"other_per_s,omitempty"`
	NotSentPerSec     float64 `json:"not_sent_per_s,omitempty"`
	ExemptP50         float64 `json:"exempt_p50_ms"`
	ExemptP99         float64 `json:"exempt_p99_ms"`
	HighP50           float64 `json:"high_p50_ms"`
	HighP99           float64 `json:"high_p99_ms"`
	ProbeErrors       int64   `json:"probe_errors"`
	RSSMinMB          int64   `json:"rss_min_mb,omitempty"`
	RSSMaxMB          int64   `json:"rss_max_mb,omitempty"`
	ServerCPUPerSec   float64 `json:"server_cpu_cores,omitempty"`
	ServerCPUmsPerOK  float64 `json:"server_cpu_ms_per_ok,omitempty"`
	ClientCPUPerSec   float64 `json:"client_cpu_cores"`
}

// clientsets builds the admin configuration and clientset of kubeconfig.
func clientsets(kubeconfig string) (*rest.Config, *kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	return cfg, cs, err
}

// loadProcessMain is the -load-process child: the low-priority user's client, driven by
// its parent (serveLoad).
func loadProcessMain(kubeconfig string, maxInFlight int) error {
	ctx := context.Background()
	cfg, cs, err := clientsets(kubeconfig)
	if err != nil {
		return err
	}
	lowCfg, err := tokenConfig(ctx, cs, cfg, ns, "load")
	if err != nil {
		return err
	}
	low, err := newTarget(lowCfg)
	if err != nil {
		return err
	}
	return serveLoad(ctx, low, maxInFlight, os.Stdin, os.Stdout)
}

func run(kubeconfig, name string, pids []int, workers int, factor float64, phase time.Duration, maxInFlight int, separate bool) error {
	cfg, cs, err := clientsets(kubeconfig)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for i := range 100 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"n": "0", "pad": strings.Repeat("x", 512)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	lowCfg, err := tokenConfig(ctx, cs, cfg, ns, "load")
	if err != nil {
		return fmt.Errorf("low-priority ServiceAccount: %w", err)
	}
	highCfg, err := tokenConfig(ctx, cs, cfg, "kube-system", "apf-bench-high")
	if err != nil {
		return fmt.Errorf("kube-system ServiceAccount: %w", err)
	}
	exempt, err := newTarget(cfg)
	if err != nil {
		return err
	}
	high, err := newTarget(highCfg)
	if err != nil {
		return err
	}
	low, err := newTarget(lowCfg)
	if err != nil {
		return err
	}
	// Each of the three answers before anything is measured.
	for what, t := range map[string]target{"exempt": exempt, "high": high, "low": low} {
		if code, err := t.do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps/cm-0", nil, ""); err != nil || code != http.StatusOK {
			return fmt.Errorf("%s probe: %d %v", what, code, err)
		}
	}
	// The load: in a child process of its own, or here.
	load := func(ctx context.Context, c loadCommand) loadResult { return runLoad(ctx, low, c, maxInFlight) }
	var child *loadProcess
	if separate {
		if child, err = startLoadProcess(kubeconfig, maxInFlight); err != nil {
			return err
		}
		defer child.stop()
		load = func(ctx context.Context, c loadCommand) loadResult {
			r, err := child.run(c)
			if err != nil {
				fmt.Fprintln(os.Stderr, "apf:", err)
			}
			return r
		}
	}
	pr := &proc{pids: pids}
	var results []phaseResult
	var sustained float64
	measure := func(label string, c *loadCommand) {
		ctx, cancel := context.WithTimeout(ctx, phase)
		defer cancel()
		var wg sync.WaitGroup
		pe, ph := &probe{}, &probe{}
		wg.Add(2)
		go pe.run(ctx, exempt, &wg)
		go ph.run(ctx, high, &wg)
		if len(pids) > 0 {
			wg.Add(1)
			go pr.sample(ctx, &wg)
		}
		childCPU := func() float64 {
			if child == nil {
				return 0
			}
			return cpuSeconds(strconv.Itoa(child.cmd.Process.Pid))
		}
		cpu0, self0, t0 := pr.cpu(), cpuSeconds("self")+childCPU(), time.Now()
		var lr loadResult
		if c != nil {
			lr = load(ctx, *c)
			if label == "sustained" {
				sustained = float64(lr.OK) / phase.Seconds()
			}
		}
		ok := lr.OK
		<-ctx.Done()
		wg.Wait()
		secs := time.Since(t0).Seconds()
		r := phaseResult{Name: name, Phase: label, ProbeErrors: pe.bad.Load() + ph.bad.Load()}
		r.ExemptP50, r.ExemptP99, _ = pe.quantiles()
		r.HighP50, r.HighP99, _ = ph.quantiles()
		if c != nil {
			r.OfferedPerSec, r.OKPerSec = float64(lr.Offered)/secs, float64(lr.OK)/secs
			r.Rejected429PerSec, r.OtherPerSec, r.NotSentPerSec = float64(lr.R429)/secs, float64(lr.Other)/secs, float64(lr.NotSent)/secs
		}
		r.ClientCPUPerSec = (cpuSeconds("self") + childCPU() - self0) / secs
		if len(pids) > 0 {
			cpu := pr.cpu() - cpu0
			r.RSSMinMB, r.RSSMaxMB = pr.minRSS, pr.maxRSS
			r.ServerCPUPerSec = cpu / secs
			if ok > 0 {
				r.ServerCPUmsPerOK = cpu * 1000 / float64(ok)
			}
		}
		results = append(results, r)
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	measure("unloaded", nil)
	measure("sustained", &loadCommand{Phase: phase, Workers: workers})
	measure(fmt.Sprintf("overload %.0fx", factor), &loadCommand{Phase: phase, Rate: sustained * factor})
	measure("after", nil)
	return nil
}
