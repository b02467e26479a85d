// Command simload drives bench/simnode/run.sh: it creates pods bound to simulated nodes,
// waits until they are Running (counting transitions per second from a watch), and
// samples a process's CPU and RSS.
//
//	simload create -kubeconfig K -n 100000 -nodes 5000 -prefix sim- -ns simbench
//	simload nodes  -kubeconfig K -nodes 5000 -prefix sim-   (Nodes for kwok to manage)
//	simload wait   -kubeconfig K -n 100000 -ns simbench
//	simload check  -kubeconfig K -ns simbench   (pods Running, nodes Ready, Leases fresh)
//	simload sample -pid P -duration 10m -interval 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var useProtobuf bool

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: simload create|wait|sample [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	n := fs.Int("n", 100000, "pods")
	nodes := fs.Int("nodes", 5000, "nodes the pods are spread over")
	prefix := fs.String("prefix", "sim-", "node name prefix")
	ns := fs.String("ns", "simbench", "namespace")
	conc := fs.Int("concurrency", 128, "creates in flight")
	conns := fs.Int("connections", 8, "HTTP/2 connections the creates are spread over")
	pid := fs.Int("pid", 0, "process to sample")
	dur := fs.Duration("duration", time.Minute, "sampling time")
	every := fs.Duration("interval", 10*time.Second, "sampling interval")
	fs.BoolVar(&useProtobuf, "protobuf", false, "speak protobuf to the server")
	fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "create":
		cs := make([]*kubernetes.Clientset, max(1, *conns))
		for i := range cs {
			cs[i] = clients(*kubeconfig)
		}
		err = create(cs, *n, *nodes, *prefix, *ns, *conc)
	case "nodes":
		err = createNodes(clients(*kubeconfig), *nodes, *prefix, *conc)
	case "check":
		err = check(clients(*kubeconfig), *ns)
	case "wait":
		err = wait(clients(*kubeconfig), *n, *ns)
	case "sample":
		err = sample(*pid, *dur, *every)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "simload:", err)
		os.Exit(1)
	}
}

// clients is a clientset of its own connection (a Proxy func keeps client-go from sharing
// the cached transport), no client-side rate limit; JSON, which Kube's server answers
// without converting (-protobuf to ask for protobuf).
func clients(kubeconfig string) *kubernetes.Clientset {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		panic(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	if useProtobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return kubernetes.NewForConfigOrDie(cfg)
}

func create(all []*kubernetes.Clientset, n, nodes int, prefix, ns string, conc int) error {
	ctx := context.Background()
	cs := all[0]
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for i := 0; ; i++ {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if i > 300 {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	var done atomic.Int64
	stop := make(chan struct{})
	go func() { // progress every 10 s
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Printf("%s %d created\n", time.Now().UTC().Format(time.RFC3339), done.Load())
			}
		}
	}()
	for w := range conc {
		cs := all[w%len(all)]
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + strconv.Itoa(i), Labels: map[string]string{"app": "simbench"}},
					Spec: corev1.PodSpec{NodeName: prefix + strconv.Itoa(i%nodes+1), TerminationGracePeriodSeconds: new(int64),
						Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
				for attempt := 0; ; attempt++ {
					_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) {
						done.Add(1)
						break
					}
					if attempt == 5 {
						failed.Add(1)
						fmt.Fprintln(os.Stderr, "create", p.Name, err)
						break
					}
					time.Sleep(time.Second)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	el := time.Since(start)
	fmt.Printf("created %d pods in %.1fs (%.0f/s), %d failed\n", n, el.Seconds(), float64(n)/el.Seconds(), failed.Load())
	return nil
}

// createNodes creates the Nodes kwok manages (labelled type=kwok), as
// ../shared/peers/run-kwok.sh applies them: the labels and capacity kube sim's nodes have.
func createNodes(cs *kubernetes.Clientset, nodes int, prefix string, conc int) error {
	ctx := context.Background()
	start := time.Now()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > nodes {
					return
				}
				name := prefix + strconv.Itoa(i)
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
					Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
					Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "zone-" + strconv.Itoa((i-1)%3),
						"type": "kwok"}},
					Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}
				for attempt := 0; ; attempt++ {
					_, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) {
						break
					}
					if attempt == 5 {
						failed.Add(1)
						fmt.Fprintln(os.Stderr, "create node", name, err)
						break
					}
					time.Sleep(time.Second)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("created %d nodes in %.1fs (%.0f/s), %d failed\n", nodes, el.Seconds(), float64(nodes)/el.Seconds(), failed.Load())
	return nil
}

// wait lists and watches the namespace's pods and reports when n are Running: the time
// from its start and the Running transitions per second it saw. A watch that expired
// (the server's window moved on) lists again: pods Running by then count as turning
// Running at that list.
func wait(cs *kubernetes.Clientset, n int, ns string) error {
	ctx := context.Background()
	start := time.Now()
	running := map[string]bool{}
	first, last := time.Time{}, time.Time{}
	atList := -1
	seen := func(name string) {
		if running[name] {
			return
		}
		running[name] = true
		if atList < 0 {
			return // the first list: already Running before
		}
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		last = now
	}
	list := func() (string, error) {
		rv, cont := "", ""
		for {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
			if err != nil {
				return "", err
			}
			for _, p := range l.Items {
				if p.Status.Phase == corev1.PodRunning {
					seen(p.Name)
				}
			}
			if rv == "" {
				rv = l.ResourceVersion
			}
			if cont = l.Continue; cont == "" {
				return rv, nil
			}
		}
	}
	rv, err := list()
	if err != nil {
		return err
	}
	atList = len(running)
	fmt.Printf("%s listed: %d Running\n", time.Now().UTC().Format(time.RFC3339), atList)
	report := time.Now()
	relists := 0
	for len(running) < n {
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		expired := err != nil
		if err == nil {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					expired = true
					break
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type == watch.Bookmark {
					continue
				}
				if p.Status.Phase == corev1.PodRunning && ev.Type != watch.Deleted {
					seen(p.Name)
				}
				if time.Since(report) > 10*time.Second {
					report = time.Now()
					fmt.Printf("%s %d Running\n", report.UTC().Format(time.RFC3339), len(running))
				}
				if len(running) >= n {
					break
				}
			}
			w.Stop()
		}
		if expired && len(running) < n {
			relists++
			fmt.Printf("%s watch ended (%v): listing again\n", time.Now().UTC().Format(time.RFC3339), err)
			if rv, err = list(); err != nil {
				return err
			}
		}
	}
	seenN := len(running) - atList
	if seenN > 0 && last.After(first) {
		fmt.Printf("all %d Running %.1fs after start; %d transitions to Running watched from %s to %s: %.0f/s (%.0f/s from start; %d relists)\n",
			n, time.Since(start).Seconds(), seenN, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339),
			float64(seenN)/last.Sub(first).Seconds(), float64(seenN)/last.Sub(start).Seconds(), relists)
	} else {
		fmt.Printf("all %d Running (%d already at the list)\n", n, atList)
	}
	return nil
}

// check counts the namespace's Running pods, the Ready nodes and the node Leases renewed
// in the last 40 s (their leaseDurationSeconds).
func check(cs *kubernetes.Clientset, ns string) error {
	ctx := context.Background()
	running, pods := 0, 0
	for cont := ""; ; {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			pods++
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nl.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	ll, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fresh := 0
	for _, l := range ll.Items {
		if l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 40*time.Second {
			fresh++
		}
	}
	fmt.Printf("%d/%d pods Running, %d/%d nodes Ready, %d/%d Leases renewed in the last 40 s\n", running, pods, ready, len(nl.Items), fresh, len(ll.Items))
	return nil
}

// sample reads /proc/<pid> every interval: CPU cores used per interval, RSS.
func sample(pid int, dur, every time.Duration) error {
	tick := float64(100) // USER_HZ
	// rss is VmRSS; anon its RssAnon (the process's private memory; the rest is mapped
	// file pages, mostly the executable's, shared with any process of the same binary).
	read := func() (cpu float64, rss, anon int64, err error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, 0, 0, err
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, 0, 0, err
		}
		for _, line := range strings.Split(string(st), "\n") {
			for key, dst := range map[string]*int64{"VmRSS:": &rss, "RssAnon:": &anon} {
				if strings.HasPrefix(line, key) {
					kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
					*dst = kb * 1024
				}
			}
		}
		return (u + s) / tick, rss, anon, nil
	}
	c0, _, _, err := read()
	if err != nil {
		return err
	}
	t0 := time.Now()
	prev, prevT := c0, t0
	var maxRSS, maxAnon int64
	var maxCores float64
	for time.Since(t0) < dur {
		time.Sleep(every)
		c, rss, anon, err := read()
		if err != nil {
			return err
		}
		cores := (c - prev) / time.Since(prevT).Seconds()
		prev, prevT = c, time.Now()
		maxRSS, maxAnon, maxCores = max(maxRSS, rss), max(maxAnon, anon), max(maxCores, cores)
		fmt.Printf("%s cores=%.3f rss=%.0fMB anon=%.0fMB\n", time.Now().UTC().Format(time.RFC3339), cores, float64(rss)/1e6, float64(anon)/1e6)
	}
	fmt.Printf("over %s: average %.3f cores (max interval %.3f), max RSS %.0f MB (anonymous %.0f MB)\n", time.Since(t0).Round(time.Second),
		(prev-c0)/time.Since(t0).Seconds(), maxCores, float64(maxRSS)/1e6, float64(maxAnon)/1e6)
	return nil
}
