// Command gcbench measures garbage collection: it creates an owner ConfigMap with N
// dependents (ownerReferences with blockOwnerDeletion), deletes the owner with the chosen
// propagation policy and reports the time until every dependent is gone (observed through a
// watch) and the API requests the server served meanwhile (kube_apiserver_requests_total
// from /metrics, before and after; the benchmark's own DELETE and watch are included).
//
// Usage:
//
//	go run ./bench/gcbench -n 10000                 # in-process kube server on a temp dir
//	go run ./bench/gcbench -n 10000 -kubeconfig K   # an already running server
package main

import (
	"bufio"
	"bytes"
	"context"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/server/servertest"
)

func main() {
	n := flag.Int("n", 10000, "dependents")
	workers := flag.Int("create-workers", 32, "parallel creates while setting up")
	policy := flag.String("policy", "Background", "propagation policy of the owner's deletion: Background or Foreground")
	kubeconfig := flag.String("kubeconfig", "", "use this server instead of an in-process one")
	baseline := flag.Bool("baseline", true, "then delete N unowned ConfigMaps with create-workers client-side parallel deletes, for comparison on the same server")
	flag.Parse()
	if err := run(*n, *workers, metav1.DeletionPropagation(*policy), *kubeconfig, *baseline); err != nil {
		fmt.Fprintln(os.Stderr, "gcbench:", err)
		os.Exit(1)
	}
}

func run(n, workers int, policy metav1.DeletionPropagation, kubeconfig string, baseline bool) error {
	ctx := context.Background()
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		dir, err := servertest.TempDir()
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		srv, err := servertest.Start(dir, nil)
		if err != nil {
			return err
		}
		defer srv.Stop()
		cfg, err = srv.Config()
		if err != nil {
			return err
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("gcbench-%d", time.Now().UnixNano())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	block := true
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: &block}
	start := time.Now()
	if err := parallel(n, workers, func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("dep-%05d", i), Labels: map[string]string{"bench": "gc"},
			OwnerReferences: []metav1.OwnerReference{ref},
		}, Data: map[string]string{"k": "v"}}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("created %d dependents in %s\n", n, time.Since(start).Round(time.Millisecond))

	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "bench=gc"})
	if err != nil {
		return err
	}
	if len(list.Items) != n {
		return fmt.Errorf("listed %d dependents, want %d", len(list.Items), n)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "bench=gc", ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	// Let the collector's informers catch up with the creates before measuring.
	time.Sleep(2 * time.Second)
	before, err := scrape(ctx, cs)
	if err != nil {
		return err
	}
	start = time.Now()
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		return err
	}
	deleted := 0
	timeout := time.After(5 * time.Minute)
	for deleted < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch ended after %d deletions", deleted)
			}
			if ev.Type == watch.Deleted {
				deleted++
			}
		case <-timeout:
			return fmt.Errorf("only %d of %d dependents gone after 5 minutes", deleted, n)
		}
	}
	took := time.Since(start)
	if policy == metav1.DeletePropagationForeground {
		for {
			if _, err := cms.Get(ctx, owner.Name, metav1.GetOptions{}); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Printf("owner gone after %s\n", time.Since(start).Round(time.Millisecond))
	}
	after, err := scrape(ctx, cs)
	if err != nil {
		return err
	}
	fmt.Printf("policy %s: %d dependents gone in %s (%.0f/s)\n", policy, n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	total := 0.0
	var lines []string
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			total += d
			lines = append(lines, fmt.Sprintf("  %-60s %8.0f", k, d))
		}
	}
	sort.Strings(lines)
	fmt.Printf("API requests meanwhile: %.0f (%.0f/s)\n%s\n", total, total/took.Seconds(), strings.Join(lines, "\n"))
	if baseline {
		if err := parallel(n, workers, func(i int) error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%05d", i)}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		start := time.Now()
		if err := parallel(n, workers, func(i int) error {
			return cms.Delete(ctx, fmt.Sprintf("plain-%05d", i), metav1.DeleteOptions{})
		}); err != nil {
			return err
		}
		d := time.Since(start)
		fmt.Printf("baseline: %d client-side deletes with %d workers in %s (%.0f/s); GC time / baseline = %.2f\n",
			n, workers, d.Round(time.Millisecond), float64(n)/d.Seconds(), took.Seconds()/d.Seconds())
	}
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return nil
}

// parallel runs f(1..n) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := f(int(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// scrape reads kube_apiserver_requests_total by its labels.
func scrape(ctx context.Context, cs *kubernetes.Clientset) (map[string]float64, error) {
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "kube_apiserver_requests_total")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			continue
		}
		out[rest[:i]] = v
	}
	return out, sc.Err()
}
