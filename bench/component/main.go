// Command component measures the Component kind at scale (bench/README.md, "Components"):
// A applications × C Components (labelled app.kubernetes.io/part-of=app-<i>, no
// Application object) on simulated nodes, created → all Active, through the lifecycle
// engine with the platform's Component driver; and the same workloads written directly by a
// client as one Deployment and one Service each → all Deployments available. Both run in
// one in-process kube server (the same scheduler, controllers and simulated nodes), in
// namespaces of their own, rounds alternating the order. Results are JSON lines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	flag.Parse()
	if err := run(*apps, *comps, *nodes, *clients, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "component bench:", err)
		os.Exit(1)
	}
}

type result struct {
	Round    int     `json:"round"`
	Mode     string  `json:"mode"`
	Objects  int     `json:"components"`
	Create   float64 `json:"create_seconds"`
	AllReady float64 `json:"all_ready_seconds"`
	PerSec   float64 `json:"ready_per_second"`
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
	ctx := context.Background()
	if err := waitNodes(ctx, c, nodes); err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for r := 0; r < rounds; r++ {
		order := []string{"engine", "bare"}
		if r%2 == 1 {
			order = []string{"bare", "engine"}
		}
		for _, mode := range order {
			ns := fmt.Sprintf("bench-%s-%d", mode, r)
			if err := namespace(ctx, c, ns); err != nil {
				return err
			}
			res, err := runMode(ctx, c, mode, ns, apps, comps, clients, timeout)
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
		}
	}
	return nil
}

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
	return &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d-c%d", i, j),
		Labels: map[string]string{"app.kubernetes.io/part-of": fmt.Sprintf("app-%d", i)}},
		Spec: v1alpha1.ComponentSpec{Image: "busybox", Replicas: &one, Command: []string{"httpd", "-f"},
			Exposes: []v1alpha1.ComponentPort{{Name: "http", Port: 8080}}}}
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

func runMode(ctx context.Context, c client.Client, mode, ns string, apps, comps, clients int, timeout time.Duration) (result, error) {
	type job struct{ i, j int }
	jobs := make(chan job)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				var objs []client.Object
				if mode == "engine" {
					objs = []client.Object{component(ns, jb.i, jb.j)}
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
	for {
		ready, err := countReady(ctx, c, mode, ns)
		if err != nil {
			return result{}, err
		}
		if ready >= n {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%d/%d ready after %s", ready, n, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	all := time.Since(start)
	res := result{Mode: mode, Objects: n, Create: created.Seconds(), AllReady: all.Seconds(), PerSec: float64(n) / all.Seconds()}
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

func countReady(ctx context.Context, c client.Client, mode, ns string) (int, error) {
	n := 0
	if mode == "engine" {
		var l v1alpha1.ComponentList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		for _, x := range l.Items {
			if x.Status.Phase == "Active" {
				n++
			}
		}
		return n, nil
	}
	var l appsv1.DeploymentList
	if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	for _, d := range l.Items {
		if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.UpdatedReplicas == 1 {
			n++
		}
	}
	return n, nil
}
