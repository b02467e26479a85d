// Command endpoints measures EndpointSlice update latency: SERVICES Services with ENDPOINTS
// pods each on one fixture node, all pods Running with an IP and all but one per sampled
// Service Ready (the pods are made first and the Services after them, so that a Service's
// first sync writes its slices whole rather than once per pod); once every pod is in its
// Service's EndpointSlices, SAMPLES pods turn Ready (pods/status, RATE per second) and the
// time from each status write to the watch event of an EndpointSlice listing that pod ready
// is recorded. Prints one JSON line: p50, p90, p99, max, and how many were not seen within
// -timeout. Whatever EndpointSlice controller the server runs (Kube's own, or
// kube-controller-manager pointed at it) is what is measured.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	ns   = "bench-eps"
	node = "bench-eps-node"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	services := flag.Int("services", 10000, "Services")
	endpoints := flag.Int("endpoints", 10, "pods per Service")
	samples := flag.Int("samples", 1000, "pods turned Ready while measuring (one per sampled Service)")
	rate := flag.Float64("rate", 50, "pods turned Ready per second while measuring")
	writers := flag.Int("writers", 64, "concurrent writers while setting up")
	timeout := flag.Duration("timeout", 60*time.Second, "how long a sample may take before it counts as missed")
	label := flag.String("label", "", "name of this run in the JSON line")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if *samples > *services {
		*samples = *services
	}
	stride := *services / *samples

	// setup
	start := time.Now()
	must(ignoreExists(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})))
	must(ignoreExists(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})))
	go heartbeat(ctx, cs)
	total := *services * *endpoints
	sampled := func(i, j int) bool { return j == 0 && i%stride == 0 && i/stride < *samples }
	parallel(*writers, total, func(k int) error {
		i, j := k / *endpoints, k%*endpoints
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName(i, j), Labels: map[string]string{"app": fmt.Sprintf("svc-%d", i)}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, withStatus(p, ip(k), !sampled(i, j)), metav1.UpdateOptions{})
		return err
	})
	log.Printf("%d pods in %s", total, time.Since(start).Round(time.Millisecond))
	parallel(*writers, *services, func(i int) error {
		_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": fmt.Sprintf("svc-%d", i)},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		return ignoreExists[any](nil, err)
	})
	log.Printf("%d services in %s", *services, time.Since(start).Round(time.Millisecond))

	// wait until every pod is an endpoint
	var rv string
	for {
		n := 0
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		must(err)
		for _, s := range l.Items {
			n += len(s.Endpoints)
		}
		rv = l.ResourceVersion
		if n >= total {
			break
		}
		log.Printf("%d of %d endpoints in slices", n, total)
		time.Sleep(2 * time.Second)
	}
	converged := time.Since(start)
	log.Printf("all endpoints in slices after %s", converged.Round(time.Millisecond))

	// measure
	var mu sync.Mutex
	sent := map[string]time.Time{}    // before the status write
	written := map[string]time.Time{} // its response: the pod is Ready in the API
	seen := map[string]time.Time{}    // the first slice event listing it ready
	done := make(chan struct{})
	w, err := cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	must(err)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			for _, e := range s.Endpoints {
				if e.TargetRef == nil || e.Conditions.Ready == nil || !*e.Conditions.Ready {
					continue
				}
				if _, ok := sent[e.TargetRef.Name]; ok {
					if _, dup := seen[e.TargetRef.Name]; !dup {
						seen[e.TargetRef.Name] = now
					}
				}
			}
			n := len(seen)
			mu.Unlock()
			if n == *samples {
				return
			}
		}
	}()
	var errs atomic.Int64
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	for s := range *samples {
		<-tick.C
		i := s * stride
		go func() {
			name := podName(i, 0)
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			sent[name] = time.Now()
			mu.Unlock()
			if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, withStatus(p, ip(i**endpoints), true), metav1.UpdateOptions{}); err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			written[name] = time.Now()
			mu.Unlock()
		}()
	}
	tick.Stop()
	select {
	case <-done:
	case <-time.After(*timeout):
	}
	w.Stop()
	mu.Lock()
	var lat, latWritten []time.Duration
	for name, t1 := range seen {
		lat = append(lat, t1.Sub(sent[name]))
		if t, ok := written[name]; ok {
			latWritten = append(latWritten, max(0, t1.Sub(t)))
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	slices.Sort(latWritten)
	quantile := func(l []time.Duration, p float64) float64 {
		if len(l) == 0 {
			return 0
		}
		return float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds()) / 1000
	}
	q := func(p float64) float64 { return quantile(lat, p) }
	out := map[string]any{"label": *label, "services": *services, "endpoints_per_service": *endpoints, "samples": *samples, "rate": *rate,
		"seen": len(lat), "missed": *samples - len(lat), "errors": errs.Load(), "setup_s": converged.Seconds(),
		"p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99), "max_ms": q(1),
		// from the status write's response (the pod Ready in the API) rather than its start
		"written_p50_ms": quantile(latWritten, 0.50), "written_p99_ms": quantile(latWritten, 0.99)}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func podName(i, j int) string { return fmt.Sprintf("svc-%d-%d", i, j) }

// ip is the k-th pod's address in 10.0.0.0/8.
func ip(k int) string { k++; return fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255) }

func withStatus(p *corev1.Pod, addr string, ready bool) *corev1.Pod {
	p = p.DeepCopy()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP = addr, []corev1.PodIP{{IP: addr}}, "192.0.2.1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now}}
	return p
}

// heartbeat keeps the fixture node Ready with its Lease renewed, so no node lifecycle
// controller marks its pods not ready during the run.
func heartbeat(ctx context.Context, cs kubernetes.Interface) {
	for {
		if n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
			now := metav1.Now()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
			_, _ = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		}
		leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		t := metav1.NewMicroTime(time.Now())
		if l, err := leases.Get(ctx, node, metav1.GetOptions{}); err == nil {
			l.Spec.RenewTime = &t
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		} else {
			holder, d := node, int32(40)
			_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &t}}, metav1.CreateOptions{})
		}
		time.Sleep(10 * time.Second)
	}
}

// parallel runs f(0) … f(n-1) on at most workers goroutines; the first error ends the run.
func parallel(workers, n int, f func(int) error) {
	var g errgroup.Group
	g.SetLimit(workers)
	for k := range n {
		g.Go(func() error {
			if err := f(k); err != nil {
				log.Fatalf("item %d: %v", k, err)
			}
			return nil
		})
	}
	_ = g.Wait()
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
