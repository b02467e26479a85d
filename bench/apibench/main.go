// Command apibench measures request rate and latency of configmap create, get, list (500
// objects) and update at several client concurrencies, either against an API server (Kube or
// kube-apiserver, through a kubeconfig, with client-go's typed client as real clients use
// it) or against Kube's store directly on an embedded etcd (-store), so the cost of the API
// path can be read off as a ratio. See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// backend is one way to do the four operations.
type backend interface {
	create(ctx context.Context, ns, name string) error
	get(ctx context.Context, ns, name string) error
	list(ctx context.Context, ns string) (int, error)
	update(ctx context.Context, ns, name string, i int) error
	prepareNamespace(ctx context.Context, ns string) error
}

type result struct {
	Target  string  `json:"target"`
	Op      string  `json:"op"`
	Clients int     `json:"clients"`
	N       int     `json:"n"`
	Rate    float64 `json:"rate"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	Errors  int64   `json:"errors"`
	// ServerCPUms is the CPU the server's processes (-pids) spent per operation, in ms.
	ServerCPUms float64 `json:"server_cpu_ms,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "API server to measure")
	useStore := flag.Bool("store", false, "measure Kube's store on an embedded etcd instead of an API server")
	target := flag.String("name", "", "label for the results (default: kubeconfig or store)")
	clients := flag.String("clients", "8,64", "comma-separated concurrencies")
	n := flag.Int("n", 2000, "operations per create/get/update phase")
	lists := flag.Int("lists", 200, "list operations per phase")
	jsonBodies := flag.Bool("json", false, "send JSON instead of protobuf request bodies")
	pidList := flag.String("pids", "", "comma-separated pids of the server's processes (its etcd too, when separate): their CPU per operation is reported")
	ops := flag.String("ops", "create,get,list500,update", "phases to run and report (the creates always run: the other phases need the objects)")
	flag.Parse()

	ctx := context.Background()
	var b backend
	label := *target
	switch {
	case *useStore:
		dir, err := os.MkdirTemp("", "apibench-etcd-")
		check(err)
		defer os.RemoveAll(dir)
		m, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: dir})
		check(err)
		defer m.Close()
		cli := m.Client() // in-process, as kube server talks to its embedded member
		defer cli.Close()
		b = &storeBackend{s: storage.New(cli)}
		if label == "" {
			label = "store"
		}
	case *kubeconfig != "":
		cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		check(err)
		cfg.QPS, cfg.Burst = -1, 0
		if *jsonBodies {
			cfg.ContentType = "application/json"
		}
		cs, err := kubernetes.NewForConfig(cfg)
		check(err)
		b = &apiBackend{cs: cs}
		if label == "" {
			label = *kubeconfig
		}
	default:
		fmt.Fprintln(os.Stderr, "give -kubeconfig or -store")
		os.Exit(2)
	}

	for _, p := range strings.Split(*pidList, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pid, err := strconv.Atoi(p)
			check(err)
			serverPids = append(serverPids, pid)
		}
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano()%100000)
	for _, cs := range strings.Split(*clients, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(cs))
		check(err)
		ns := fmt.Sprintf("bench-%s-%d", run, c)
		check(b.prepareNamespace(ctx, ns))
		listNS := ns + "-list"
		check(b.prepareNamespace(ctx, listNS))
		for i := 0; i < 500; i++ {
			check(b.create(ctx, listNS, fmt.Sprintf("cm-%04d", i)))
		}
		name := func(i int) string { return fmt.Sprintf("cm-%05d", i) }
		want := map[string]bool{}
		for _, op := range strings.Split(*ops, ",") {
			want[strings.TrimSpace(op)] = true
		}
		if r := phase(label, "create", c, *n, func(i int) error { return b.create(ctx, ns, name(i)) }); want["create"] {
			report(r)
		}
		if want["get"] {
			report(phase(label, "get", c, *n, func(i int) error { return b.get(ctx, ns, name((i*7919)%*n)) }))
		}
		if *lists > 0 && want["list500"] {
			report(phase(label, "list500", c, *lists, func(int) error {
				got, err := b.list(ctx, listNS)
				// 501 where a controller has published kube-root-ca.crt in the namespace.
				if err == nil && got != 500 && got != 501 {
					err = fmt.Errorf("list returned %d items, want 500 (501 with kube-root-ca.crt)", got)
				}
				return err
			}))
		}
		if want["update"] {
			report(phase(label, "update", c, *n, func(i int) error { return b.update(ctx, ns, name(i), i) }))
		}
	}
}

// phase runs op n times spread over c workers and measures each call.
func phase(target, op string, c, n int, fn func(i int) error) result {
	lat := make([]time.Duration, n)
	var next, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0 := serverCPU()
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				if err := fn(i); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := serverCPU() - cpu0
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "%s %s c=%d: %d errors, first: %v\n", target, op, c, errs.Load(), e)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(n-1))].Microseconds()) / 1000 }
	return result{Target: target, Op: op, Clients: c, N: n, Rate: float64(n) / elapsed.Seconds(), P50ms: pct(0.50), P99ms: pct(0.99), Errors: errs.Load(), ServerCPUms: cpu.Seconds() * 1000 / float64(n)}
}

// serverPids are the processes whose CPU serverCPU sums.
var serverPids []int

// serverCPU is the user and system CPU time the server's processes have used so far (0 with
// no -pids), from /proc/<pid>/stat in clock ticks of 10 ms.
func serverCPU() time.Duration {
	var ticks int64
	for _, pid := range serverPids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		check(err)
		// The command name (field 2) may hold spaces; the fields after its ')' are fixed.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func report(r result) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "apibench:", err)
		os.Exit(1)
	}
}

type apiBackend struct{ cs kubernetes.Interface }

func (a *apiBackend) prepareNamespace(ctx context.Context, ns string) error {
	_, err := a.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

func (a *apiBackend) create(ctx context.Context, ns, name string) error {
	_, err := a.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"key": "value", "n": name},
	}, metav1.CreateOptions{})
	return err
}

func (a *apiBackend) get(ctx context.Context, ns, name string) error {
	_, err := a.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}

func (a *apiBackend) list(ctx context.Context, ns string) (int, error) {
	l, err := a.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// update is an unconditional PUT (no resourceVersion), as a client that owns the object does.
func (a *apiBackend) update(ctx context.Context, ns, name string, i int) error {
	_, err := a.cs.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"key": "value", "n": name, "i": strconv.Itoa(i)},
	}, metav1.UpdateOptions{})
	return err
}

type storeBackend struct{ s *storage.Store }

func (s *storeBackend) prepareNamespace(context.Context, string) error { return nil }

func cmObject(ns, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": "bench"},
			"uid": "00000000-0000-0000-0000-000000000000", "creationTimestamp": "2026-01-01T00:00:00Z"},
		"data": data,
	}}
}

func (s *storeBackend) create(ctx context.Context, ns, name string) error {
	_, err := s.s.Create(ctx, storage.Key("", "configmaps", ns, name), cmObject(ns, name, map[string]any{"key": "value", "n": name}))
	return err
}

func (s *storeBackend) get(ctx context.Context, ns, name string) error {
	_, err := s.s.Get(ctx, storage.Key("", "configmaps", ns, name))
	return err
}

func (s *storeBackend) list(ctx context.Context, ns string) (int, error) {
	l, err := s.s.List(ctx, storage.NamespacePrefix("", "configmaps", ns), storage.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

func (s *storeBackend) update(ctx context.Context, ns, name string, i int) error {
	_, err := s.s.GuaranteedUpdate(ctx, storage.Key("", "configmaps", ns, name), storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.Object["data"] = map[string]any{"key": "value", "n": name, "i": strconv.Itoa(i)}
		return cur, nil
	})
	return err
}
