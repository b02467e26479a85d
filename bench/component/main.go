// Command component measures the Component kind at scale (bench/README.md, "Components"):
// A Applications × C Components (labelled app.kubernetes.io/part-of=app-<i> and
// kubeos.dev/application=app-<i>, with one Application object per i naming its Components
// unless -applications=false) on simulated nodes, created → all Components Active, through
// the lifecycle engine with the platform's Component driver; and the same workloads written
// directly by a client as one Deployment and one Service each → all Deployments available.
// Both run in one in-process kube server (the same scheduler, controllers and simulated
// nodes), in namespaces of their own, rounds alternating the order. Results are JSON lines;
// cpu_seconds is the process's user+system CPU time during the mode (server, simulated
// nodes and the bench's clients: everything runs in this process), cpu_above_idle_seconds
// the same less the idle server's rate (measured for 20 s before the first mode) times the
// mode's wall time — a mode that lasts longer on a loaded machine pays more Lease renewals
// and heartbeats, which are not its cost; -cpuprofile writes one CPU profile per mode and
// round. Readiness is counted from a watch of the namespace in both modes, and each mode
// starts once the one before has been torn down and the process's CPU is back near idle.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func main() {
	apps := flag.Int("apps", 100, "applications")
	comps := flag.Int("components", 5, "Components per application")
	nodes := flag.Int("nodes", 20, "simulated nodes")
	clients := flag.Int("clients", 8, "concurrent creating clients")
	rounds := flag.Int("rounds", 1, "engine/bare pairs (alternating order)")
	timeout := flag.Duration("timeout", 15*time.Minute, "per run")
	flag.BoolVar(&withApps, "applications", true, "create one Application object per application (engine mode)")
	flag.StringVar(&profile, "cpuprofile", "", "write a CPU profile per mode to <this>-<mode>-<round>.pprof")
	flag.StringVar(&only, "only", "", "run one mode only: engine or bare (profiling; no ratio)")
	flag.Parse()
	if only != "" && only != "engine" && only != "bare" {
		fmt.Fprintf(os.Stderr, "component bench: -only %q: want engine or bare\n", only)
		os.Exit(2)
	}
	if err := run(*apps, *comps, *nodes, *clients, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "component bench:", err)
		os.Exit(1)
	}
}

var (
	withApps bool
	profile  string
	only     string
	metrics  interface {
		Get() *rest.Request
	}
)

var requestLine = regexp.MustCompile(`^kube_apiserver_requests_total\{(.*)\} (\S+)$`)
var passLine = regexp.MustCompile(`^kube_lifecycle_reconcile_seconds_(sum|count)\{kind="Component"\} (\S+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// requestCounts reads the server's request counters by "verb resource".
func requestCounts(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	body, err := metrics.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(body), "\n") {
		if m := passLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out["passes "+m[1]] = v
			continue
		}
		m := requestLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		l := map[string]string{}
		for _, kv := range labelPair.FindAllStringSubmatch(m[1], -1) {
			l[kv[1]] = kv[2]
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		k := l["verb"] + " " + l["resource"]
		if c := l["code"]; c != "" && c[0] != '2' { // refusals (409 conflicts) apart
			k += " " + c
		}
		out[k] += v
	}
	return out
}

// requestDelta is the requests served between two readings: the total and the largest 20.
func requestDelta(before, after map[string]float64) (int, []string) {
	type kv struct {
		k string
		n int
	}
	var all []kv
	total := 0
	for k, v := range after {
		if strings.HasPrefix(k, "passes ") {
			continue
		}
		if n := int(v - before[k]); n > 0 {
			all = append(all, kv{k, n})
			total += n
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var top []string
	for i := 0; i < len(all) && i < 20; i++ {
		top = append(top, fmt.Sprintf("%s %d", all[i].k, all[i].n))
	}
	return total, top
}

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

type result struct {
	Round    int     `json:"round"`
	Mode     string  `json:"mode"`
	Objects  int     `json:"components"`
	Create   float64 `json:"create_seconds"`
	AllReady float64 `json:"all_ready_seconds"`
	PerSec   float64 `json:"ready_per_second"`
	// AppsActive (engine with Applications) is when every Application was Active.
	AppsActive float64 `json:"applications_active_seconds,omitempty"`
	// CPU is the process's CPU seconds from the first create to all ready.
	CPU float64 `json:"cpu_seconds"`
	// CPUAboveIdle is CPU less what the idle server (simulated nodes' heartbeats, Leases,
	// the bench's polling) burns in the same wall time, its rate measured once before the
	// first mode (IdleCPU, CPU seconds per second): the modes' own cost,
	// whatever their wall times.
	CPUAboveIdle float64 `json:"cpu_above_idle_seconds"`
	IdleCPU      float64 `json:"idle_cpu_per_second"`
	// Requests counts the API requests served during the mode (every client: the bench's,
	// the engine's, the controllers', the simulated nodes'); Top the largest by verb and
	// resource.
	Requests int      `json:"requests"`
	Top      []string `json:"top_requests"`
	// Passes (engine) counts the Component reconciles and PassSeconds their total time
	// (kube_lifecycle_reconcile_seconds).
	Passes      int     `json:"component_passes,omitempty"`
	PassSeconds float64 `json:"component_pass_seconds,omitempty"`
	// Lag (engine only) is, per Component, its Ready condition's transition after its
	// Deployment's Available one (second resolution): the median and the largest.
	LagMedian float64 `json:"lag_median_seconds,omitempty"`
	LagMax    float64 `json:"lag_max_seconds,omitempty"`
}

func run(apps, comps, nodes, clients, rounds int, timeout time.Duration) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logs := io.Discard
	if os.Getenv("BENCH_LOG") != "" {
		logs = os.Stderr
	}
	srv, err := servertest.StartWith(dir, logs, func(o *server.Options) {
		o.EtcdUnsafeNoFsync = true
		o.SimNodes = simnode.Options{Nodes: nodes}
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	cfg, err := srv.Config()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	metrics = cs.Discovery().RESTClient()
	ctx := context.Background()
	if err := waitNodes(ctx, c, nodes); err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	// The idle rate once, before any mode: after a mode, its teardown (the namespace's
	// deletion, the garbage collector) may still be draining.
	idle := idleCPU()
	for r := 0; r < rounds; r++ {
		order := []string{"engine", "bare"}
		if r%2 == 1 {
			order = []string{"bare", "engine"}
		}
		for _, mode := range order {
			if only != "" && mode != only {
				continue
			}
			ns := fmt.Sprintf("bench-%s-%d", mode, r)
			if err := namespace(ctx, c, ns); err != nil {
				return err
			}
			var prof *os.File
			if profile != "" {
				if prof, err = os.Create(fmt.Sprintf("%s-%s-%d.pprof", profile, mode, r)); err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(prof); err != nil {
					return err
				}
			}
			res, err := runMode(ctx, c, cfg, mode, ns, apps, comps, clients, timeout)
			res.IdleCPU = round3(idle)
			res.CPUAboveIdle = round3(res.CPU - idle*res.AllReady)
			if prof != nil {
				pprof.StopCPUProfile()
				prof.Close()
			}
			if err != nil {
				return fmt.Errorf("round %d %s: %w", r, mode, err)
			}
			res.Round = r
			_ = enc.Encode(res)
			if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
			if err := waitGone(ctx, c, ns, timeout); err != nil {
				return err
			}
			settle(idle)
		}
	}
	return nil
}

// idleWindow is how long the idle server's CPU is measured, once before the first mode.
const idleWindow = 20 * time.Second

// idleCPU is the process's CPU seconds per second over idleWindow with nothing to do but
// what runs anyway (simulated nodes' heartbeats, Leases). It starts after a settling spell
// (the server's start-up work: CRDs, caches, node leases).
func idleCPU() float64 {
	time.Sleep(idleWindow / 2)
	start, cpu0 := time.Now(), cpuSeconds()
	time.Sleep(idleWindow)
	return (cpuSeconds() - cpu0) / time.Since(start).Seconds()
}

// settle waits until the process's CPU rate over a second is back near idle (the last
// mode's teardown — the namespace's deletion, the garbage collector, the engine's
// finalizers — is done), at most a minute, so that a mode does not pay for the one before.
func settle(idle float64) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		cpu0 := cpuSeconds()
		time.Sleep(time.Second)
		if cpuSeconds()-cpu0 <= 2*idle+0.02 {
			return
		}
	}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func waitNodes(ctx context.Context, c client.Client, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var l corev1.NodeList
		if err := c.List(ctx, &l); err == nil {
			ready := 0
			for _, nd := range l.Items {
				for _, cond := range nd.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready >= n {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%d nodes not ready", n)
}

func namespace(ctx context.Context, c client.Client, ns string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var sa corev1.ServiceAccount
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &sa); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no ServiceAccount in %s", ns)
}

func waitGone(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s not gone", ns)
}

// objects are the i-th application's j-th workload in both forms: the Component, and the
// Deployment and Service a client would write for it (the driver's labels and shape).
func component(ns string, i, j int) *v1alpha1.Component {
	one := int32(1)
	app := fmt.Sprintf("app-%d", i)
	return &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d-c%d", i, j),
		Labels: map[string]string{"app.kubernetes.io/part-of": app, "kubeos.dev/application": app}},
		Spec: v1alpha1.ComponentSpec{Image: "busybox", Replicas: &one, Command: []string{"httpd", "-f"},
			Exposes: []v1alpha1.ComponentPort{{Name: "http", Port: 8080}}}}
}

// application is the i-th Application, naming its comps Components.
func application(ns string, i, comps int) *v1alpha1.Application {
	a := &v1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d", i)}}
	for j := 0; j < comps; j++ {
		a.Spec.Components = append(a.Spec.Components, fmt.Sprintf("app-%d-c%d", i, j))
	}
	return a
}

func bare(ns string, i, j int) (*appsv1.Deployment, *corev1.Service) {
	name, app := fmt.Sprintf("app-%d-c%d", i, j), fmt.Sprintf("app-%d", i)
	labels := map[string]string{"kubeos.dev/component": name, "app.kubernetes.io/name": name, "app.kubernetes.io/part-of": app, "app.kubernetes.io/managed-by": "bench"}
	pod := map[string]string{"kubeos.dev/track": "stable"}
	for k, v := range labels {
		pod[k] = v
	}
	one := int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubeos.dev/component": name, "kubeos.dev/track": "stable"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "main", Image: "busybox", Command: []string{"httpd", "-f"}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}}}
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"kubeos.dev/component": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}
	return d, s
}

func runMode(ctx context.Context, c client.Client, cfg *rest.Config, mode, ns string, apps, comps, clients int, timeout time.Duration) (result, error) {
	type job struct{ i, j int }
	jobs := make(chan job)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	rw, err := startReadyWatch(cfg, mode, ns)
	if err != nil {
		return result{}, err
	}
	defer rw.close()
	start, cpu0, req0 := time.Now(), cpuSeconds(), requestCounts(ctx)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				var objs []client.Object
				if mode == "engine" {
					objs = []client.Object{component(ns, jb.i, jb.j)}
					if withApps && jb.j == 0 {
						objs = append(objs, application(ns, jb.i, comps))
					}
				} else {
					d, s := bare(ns, jb.i, jb.j)
					objs = []client.Object{d, s}
				}
				for _, o := range objs {
					if err := createRetry(ctx, c, o); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	for i := 0; i < apps; i++ {
		for j := 0; j < comps; j++ {
			jobs <- job{i, j}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return result{}, err
	default:
	}
	created := time.Since(start)
	n := apps * comps
	deadline := start.Add(timeout)
	if err := rw.wait(n, deadline); err != nil {
		return result{}, fmt.Errorf("after %s: %w", timeout, err)
	}
	all := time.Since(start)
	res := result{Mode: mode, Objects: n, Create: created.Seconds(), AllReady: all.Seconds(), PerSec: float64(n) / all.Seconds(), CPU: cpuSeconds() - cpu0}
	req1 := requestCounts(ctx)
	res.Requests, res.Top = requestDelta(req0, req1)
	res.Passes, res.PassSeconds = int(req1["passes count"]-req0["passes count"]), req1["passes sum"]-req0["passes sum"]
	if mode == "engine" && withApps {
		for {
			active, err := countActiveApps(ctx, c, ns)
			if err != nil {
				return result{}, err
			}
			if active >= apps {
				break
			}
			if time.Now().After(deadline) {
				return result{}, fmt.Errorf("%d/%d Applications Active after %s", active, apps, timeout)
			}
			time.Sleep(250 * time.Millisecond)
		}
		res.AppsActive = time.Since(start).Seconds()
	}
	if mode == "engine" {
		lags, err := readyLags(ctx, c, ns)
		if err != nil {
			return result{}, err
		}
		if len(lags) > 0 {
			slices.Sort(lags)
			res.LagMedian, res.LagMax = lags[len(lags)/2], lags[len(lags)-1]
		}
	}
	return res, nil
}

// readyLags is, per Component, how long after its Deployment became Available it became
// Ready.
func readyLags(ctx context.Context, c client.Client, ns string) ([]float64, error) {
	var comps v1alpha1.ComponentList
	if err := c.List(ctx, &comps, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	avail := map[string]time.Time{}
	for _, d := range deps.Items {
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				avail[d.Name] = cond.LastTransitionTime.Time
			}
		}
	}
	var out []float64
	for _, x := range comps.Items {
		a, ok := avail[x.Name]
		if r := meta.FindStatusCondition(x.Status.Conditions, "Ready"); ok && r != nil && r.Status == metav1.ConditionTrue {
			out = append(out, r.LastTransitionTime.Sub(a).Seconds())
		}
	}
	return out, nil
}

func createRetry(ctx context.Context, c client.Client, o client.Object) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = c.Create(ctx, o); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return err
}

func countActiveApps(ctx context.Context, c client.Client, ns string) (int, error) {
	var l v1alpha1.ApplicationList
	if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, a := range l.Items {
		if a.Status.Phase == "Active" {
			n++
		}
	}
	return n, nil
}

// readyWatch counts a mode's ready objects in one namespace from an informer (Components
// Active, or Deployments available), so that measuring costs the same per change on both
// sides — polling lists of every object would charge the engine's side a JSON list of 500
// Components four times a second against the bare side's protobuf Deployments.
type readyWatch struct {
	mu      sync.Mutex
	ready   map[string]bool
	changed chan struct{}
	stop    chan struct{}
}

func startReadyWatch(cfg *rest.Config, mode, ns string) (*readyWatch, error) {
	w := &readyWatch{ready: map[string]bool{}, changed: make(chan struct{}, 1), stop: make(chan struct{})}
	var inf cache.SharedIndexInformer
	if mode == "engine" {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		gvr := v1alpha1.GroupVersion.WithResource("components")
		inf = dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	} else {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		inf = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns)).Apps().V1().Deployments().Informer()
	}
	set := func(obj any) {
		var name string
		var ok bool
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
			name, ok = o.GetName(), phase == "Active"
		case *appsv1.Deployment:
			name, ok = o.Name, o.Status.ObservedGeneration >= o.Generation && o.Status.AvailableReplicas == 1 && o.Status.ReadyReplicas == 1 && o.Status.UpdatedReplicas == 1
		default:
			return
		}
		w.mu.Lock()
		w.ready[name] = ok
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: set, UpdateFunc: func(_, n any) { set(n) }}); err != nil {
		return nil, err
	}
	go inf.Run(w.stop)
	if !cache.WaitForCacheSync(w.stop, inf.HasSynced) {
		return nil, fmt.Errorf("the %s informer did not sync", mode)
	}
	return w, nil
}

func (w *readyWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ok := range w.ready {
		if ok {
			n++
		}
	}
	return n
}

// wait returns when n objects are ready, or with an error at the deadline.
func (w *readyWatch) wait(n int, deadline time.Time) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for w.count() < n {
		select {
		case <-w.changed:
		case <-t.C:
			return fmt.Errorf("%d/%d ready by the deadline", w.count(), n)
		}
	}
	return nil
}

func (w *readyWatch) close() { close(w.stop) }
