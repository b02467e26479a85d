// Command podbench measures the pod path of an API server (Kube or kube-apiserver, through a
// kubeconfig) as issue 13 states it, with client-go's typed clientset as real clients use it
// (protobuf bodies, no client-side rate limit):
//
//   - create: N pods of scheduler_perf's pod-default shape (test/integration/scheduler_perf/
//     templates/pod-default.yaml of k8s.io/kubernetes v1.37.2: one container pause, requests
//     and limits cpu 100m memory 500Mi, generateName pod-) by W writers: rate, p50/p99, the
//     server's CPU seconds per create and its RSS with the pods stored (from /proc/<pid> of
//     -pid);
//   - watch: K watchers (one per node, fieldSelector=spec.nodeName=node-<i>, each a list then
//     a watch from its resourceVersion, as a node agent's reflector; the watches spread over
//     several HTTP/2 connections) over P pods bound to those nodes, while U pod status updates
//     per second flow for D seconds, spread over the nodes: the delivery latency of each
//     update to its node's watcher (p50/p99/max, from just before the PUT was sent), events
//     lost, and the server's CPU per delivered event. The same updates run once before the
//     watchers start (-baseline), so that what the writes alone cost can be subtracted.
//
// Results are JSON lines on stdout; progress on stderr. See bench/README.md ("Workload API").
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type result struct {
	Target string  `json:"target"`
	Op     string  `json:"op"`
	N      int     `json:"n"`
	Rate   float64 `json:"rate,omitempty"`
	P50ms  float64 `json:"p50_ms,omitempty"`
	P99ms  float64 `json:"p99_ms,omitempty"`
	MaxMs  float64 `json:"max_ms,omitempty"`
	Errors int64   `json:"errors"`
	// Server figures (from /proc/<pid>): CPU seconds over the phase, per operation or per
	// delivered event, and RSS at its end.
	CPUs       float64 `json:"cpu_s,omitempty"`
	CPUmsPerOp float64 `json:"cpu_ms_per_op,omitempty"`
	RSSMB      float64 `json:"rss_mb,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"`
	Lost       int64   `json:"lost,omitempty"`
	Note       string  `json:"note,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "API server to measure")
	target := flag.String("name", "", "label for the results")
	pid := flag.Int("pid", 0, "the server's process id, for CPU and RSS (0: not reported)")
	pods := flag.Int("pods", 10000, "pods to create in the create phase (0 skips it)")
	writers := flag.Int("writers", 8, "concurrent writers in the create phase")
	watchers := flag.Int("watchers", 5000, "node watchers in the watch phase (0 skips it)")
	boundPods := flag.Int("bound-pods", 10000, "pods bound to the watchers' nodes (spread evenly), created before the watch phase")
	updates := flag.Int("updates", 500, "pod status updates per second in the watch phase")
	duration := flag.Duration("duration", 30*time.Second, "length of the watch phase")
	perConn := flag.Int("watchers-per-conn", 200, "watches per HTTP/2 connection")
	senders := flag.Int("senders", 64, "concurrent status updaters in the watch phase")
	baseline := flag.Bool("baseline", true, "run the updates once without watchers first (the writes' own cost)")
	settle := flag.Duration("settle", 5*time.Second, "wait after the creates before reading RSS")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "give -kubeconfig")
		os.Exit(2)
	}
	if *target == "" {
		*target = *kubeconfig
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 0
	cs, err := kubernetes.NewForConfig(cfg)
	check(err)
	ctx := context.Background()
	b := &bench{cfg: cfg, cs: cs, name: *target, pid: *pid}

	if *pods > 0 {
		ns := "podbench-create"
		check(b.namespace(ctx, ns))
		b.report(b.create(ctx, ns, *pods, *writers))
		time.Sleep(*settle)
		b.report(result{Target: b.name, Op: "rss-stored", N: *pods, RSSMB: b.rss(), Note: fmt.Sprintf("RSS %v after the last create", *settle)})
	}
	if *watchers > 0 {
		ns := "podbench-watch"
		check(b.namespace(ctx, ns))
		b.report(b.watchPhase(ctx, ns, *watchers, *boundPods, *updates, *duration, *perConn, *senders, *baseline))
	}
}

type bench struct {
	cfg  *rest.Config
	cs   *kubernetes.Clientset
	name string
	pid  int
}

func (b *bench) report(r result) {
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

// namespace creates ns and its default ServiceAccount (kube-apiserver without
// kube-controller-manager has none, and the ServiceAccount admission plugin needs it).
func (b *bench) namespace(ctx context.Context, ns string) error {
	_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = b.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podDefault is scheduler_perf's pod-default.yaml (v1.37.2).
func podDefault(ns string) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: "registry.k8s.io/pause:3.10.2",
			Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()},
		}}},
	}
}

func (b *bench) create(ctx context.Context, ns string, n, writers int) result {
	fmt.Fprintf(os.Stderr, "%s: creating %d pods with %d writers\n", b.name, n, writers)
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, writers)
	cpu0 := b.cpu()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			pods := b.cs.CoreV1().Pods(ns)
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				t := time.Now()
				_, err := pods.Create(ctx, podDefault(ns), metav1.CreateOptions{})
				lat[w] = append(lat[w], time.Since(t))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				if i%10000 == 0 {
					fmt.Fprintf(os.Stderr, "%s: %d pods after %.1fs\n", b.name, i, time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	cpu := b.cpu() - cpu0
	r := result{Target: b.name, Op: "create", N: n, Rate: float64(n) / el.Seconds(), Errors: errs.Load(), Seconds: el.Seconds(), RSSMB: b.rss()}
	r.P50ms, r.P99ms, r.MaxMs = pct(lat)
	if b.pid > 0 {
		r.CPUs, r.CPUmsPerOp = cpu, cpu*1000/float64(n)
	}
	if e, ok := firstErr.Load().(string); ok {
		r.Note = "first error: " + e
	}
	return r
}

// watchPhase: bound pods, then the node watchers, then the status updates.
func (b *bench) watchPhase(ctx context.Context, ns string, nodes, bound, rate int, d time.Duration, perConn, senders int, baseline bool) result {
	node := func(i int) string { return fmt.Sprintf("node-%d", i) }
	podName := func(i int) string { return fmt.Sprintf("bound-%06d", i) }
	fmt.Fprintf(os.Stderr, "%s: creating %d pods bound to %d nodes\n", b.name, bound, nodes)
	var next atomic.Int64
	var wg sync.WaitGroup
	var createErr atomic.Value
	boundObjs := make([]*corev1.Pod, bound)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= bound {
					return
				}
				p := podDefault(ns)
				p.GenerateName, p.Name = "", podName(i)
				p.Spec.NodeName = node(i % nodes)
				out, err := b.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					out, err = b.cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				}
				if err != nil {
					createErr.CompareAndSwap(nil, err)
				}
				boundObjs[i] = out
			}
		})
	}
	wg.Wait()
	if e, ok := createErr.Load().(error); ok {
		check(e)
	}

	// The same updates without watchers first: what the writes alone cost the server.
	if baseline {
		fmt.Fprintf(os.Stderr, "%s: %d status updates/s for %v without watchers\n", b.name, rate, d)
		cpu0 := b.cpu()
		u := b.updates(ctx, ns, boundObjs, rate, d, senders)
		cpu := b.cpu() - cpu0
		r := result{Target: b.name, Op: "updates-alone", N: int(u.sent), Rate: float64(u.sent) / u.el.Seconds(), Seconds: u.el.Seconds(), Errors: u.errs, RSSMB: b.rss()}
		r.P50ms, r.P99ms, r.MaxMs = pct(u.lat)
		if b.pid > 0 && u.sent > 0 {
			r.CPUs, r.CPUmsPerOp = cpu, cpu*1000/float64(u.sent)
		}
		if u.firstErr != "" {
			r.Note = "first update error: " + u.firstErr
		}
		b.report(r)
	}

	// The watchers: 1 list + 1 watch each, over nodes/perConn connections.
	fmt.Fprintf(os.Stderr, "%s: starting %d node watchers\n", b.name, nodes)
	type delivery struct{ lat []time.Duration }
	got := make([]delivery, nodes)
	var delivered atomic.Int64
	var watchErrs atomic.Int64
	var firstWatchErr atomic.Value
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var ready, done sync.WaitGroup
	ready.Add(nodes)
	setupStart := time.Now()
	var clients []*kubernetes.Clientset
	for c := 0; c*perConn < nodes; c++ {
		cfg := rest.CopyConfig(b.cfg)
		// A Proxy function makes client-go's transport uncacheable: one connection per client.
		cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
		cs, err := kubernetes.NewForConfig(cfg)
		check(err)
		clients = append(clients, cs)
	}
	sem := make(chan struct{}, 32) // initial lists in flight
	for i := range nodes {
		done.Go(func() {
			pods := clients[i/perConn].CoreV1().Pods(ns)
			sel := fields.OneTermEqualSelector("spec.nodeName", node(i)).String()
			sem <- struct{}{}
			list, err := pods.List(wctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: "0"})
			<-sem
			if err != nil {
				watchErrs.Add(1)
				firstWatchErr.CompareAndSwap(nil, err.Error())
				ready.Done()
				return
			}
			rv := list.ResourceVersion
			first := true
			for wctx.Err() == nil {
				w, err := pods.Watch(wctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
				if first {
					ready.Done()
					first = false
				}
				if err != nil {
					if wctx.Err() == nil {
						watchErrs.Add(1)
						firstWatchErr.CompareAndSwap(nil, err.Error())
						time.Sleep(time.Second)
					}
					continue
				}
				for ev := range w.ResultChan() {
					now := time.Now()
					switch ev.Type {
					case watch.Modified:
						p := ev.Object.(*corev1.Pod)
						rv = p.ResourceVersion
						if sent, err := strconv.ParseInt(p.Status.Message, 10, 64); err == nil {
							got[i].lat = append(got[i].lat, now.Sub(time.Unix(0, sent)))
							delivered.Add(1)
						}
					case watch.Bookmark:
						if m, err := metaOf(ev.Object); err == nil {
							rv = m
						}
					case watch.Error:
						if wctx.Err() == nil { // not the end of the phase
							watchErrs.Add(1)
							firstWatchErr.CompareAndSwap(nil, fmt.Sprint(ev.Object))
						}
					default:
						if m, err := metaOf(ev.Object); err == nil {
							rv = m
						}
					}
				}
				w.Stop()
			}
		})
	}
	ready.Wait()
	setup := time.Since(setupStart)
	fmt.Fprintf(os.Stderr, "%s: %d watchers listed and watching after %.1fs\n", b.name, nodes, setup.Seconds())
	time.Sleep(2 * time.Second) // let the watches open on the server side
	b.report(result{Target: b.name, Op: "watchers-ready", N: nodes, Seconds: setup.Seconds(), RSSMB: b.rss(), Errors: watchErrs.Load()})

	fmt.Fprintf(os.Stderr, "%s: %d status updates/s for %v with the watchers\n", b.name, rate, d)
	cpu0 := b.cpu()
	start := time.Now()
	u := b.updates(ctx, ns, boundObjs, rate, d, senders)
	sent, sendEl := u.sent, u.el
	// Wait for the last deliveries (at most 10 s).
	deadline := time.Now().Add(10 * time.Second)
	for delivered.Load() < sent && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cpu := b.cpu() - cpu0
	el := time.Since(start)
	rss := b.rss()
	stopWatches()
	done.Wait()

	lats := make([][]time.Duration, nodes)
	for i := range got {
		lats[i] = got[i].lat
	}
	n := delivered.Load()
	r := result{Target: b.name, Op: "watch", N: int(n), Rate: float64(sent) / sendEl.Seconds(), Seconds: el.Seconds(),
		Errors: u.errs + watchErrs.Load(), Lost: sent - n, RSSMB: rss}
	r.P50ms, r.P99ms, r.MaxMs = pct(lats)
	if b.pid > 0 && n > 0 {
		r.CPUs, r.CPUmsPerOp = cpu, cpu*1000/float64(n)
	}
	var notes []string
	if u.firstErr != "" {
		notes = append(notes, "first update error: "+u.firstErr)
	}
	_, putP99, _ := pct(u.lat)
	notes = append(notes, fmt.Sprintf("PUT p99 %.1f ms", putP99))
	if e, ok := firstWatchErr.Load().(string); ok {
		notes = append(notes, "first watch error: "+e)
	}
	r.Note = fmt.Sprintf("%d watchers, %d bound pods, %d updates sent; ", nodes, bound, sent) + strings.Join(notes, "; ")
	return r
}

// updateStats is what one run of updates achieved.
type updateStats struct {
	sent, errs int64
	firstErr   string
	el         time.Duration
	lat        [][]time.Duration // PUT latencies, per sender
}

// updates sends `rate` pod status updates per second for d: pod i (round robin, so node
// i % nodes) each time, paced in ticks of 10 ms, by `senders` goroutines (enough that a slow
// server still gets the rate asked for; the rate achieved is reported). Each is the pod as
// created with a new status.message (the send time, which watchers read), in a PUT without
// resourceVersion (pods allow unconditional updates). A pod is updated once every
// len(pods)/rate seconds, never twice at once.
func (b *bench) updates(ctx context.Context, ns string, pods []*corev1.Pod, rate int, d time.Duration, senders int) updateStats {
	total := int(float64(rate) * d.Seconds())
	work := make(chan int, rate)
	var sent, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range work {
				p := pods[i%len(pods)].DeepCopy()
				p.ResourceVersion = ""
				t := time.Now()
				p.Status.Message = strconv.FormatInt(t.UnixNano(), 10)
				_, err := b.cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				lat[s] = append(lat[s], time.Since(t))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				sent.Add(1)
			}
		})
	}
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	for i := 0; i < total; {
		<-tick.C
		due := min(total, int(time.Since(start).Seconds()*float64(rate)))
		for ; i < due; i++ {
			work <- i
		}
	}
	tick.Stop()
	close(work)
	wg.Wait()
	u := updateStats{sent: sent.Load(), errs: errs.Load(), el: time.Since(start), lat: lat}
	if e, ok := firstErr.Load().(string); ok {
		u.firstErr = e
	}
	return u
}

func metaOf(obj any) (string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return p.ResourceVersion, nil
	}
	return "", fmt.Errorf("not a pod: %T", obj)
}

// cpu is the server's utime+stime in seconds (/proc/<pid>/stat fields 14 and 15, in clock
// ticks of 1/100 s on Linux).
func (b *bench) cpu() float64 {
	if b.pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.pid))
	check(err)
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// rss is the server's VmRSS in MB.
func (b *bench) rss() float64 {
	if b.pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.pid))
	check(err)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func pct(per [][]time.Duration) (p50, p99, max float64) {
	var all []time.Duration
	for _, l := range per {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return 0, 0, 0
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(all[len(all)/2]), ms(all[(len(all)-1)*99/100]), ms(all[len(all)-1])
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "podbench:", err)
		os.Exit(1)
	}
}
