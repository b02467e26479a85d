// Command ctlbench measures kube ctl (bench/README.md, "Operator tooling"): `tree -D` of an
// object with -dependents Credentials depending on it, and `health -A` with -objects managed
// objects in all, each as a user runs it (the kube binary at -kube, a fresh process with
// kubectl's discovery and kubeconfig handling), against one in-process kube server started
// with the engine's controllers off (NoEngine: objects stay Pending; the graph, phases and
// aggregates are tracked as on any server; etcd without fsync, as creating is not measured).
// The ops API's own latency is reported beside, with its objects pages (a filtered, sorted
// page of one namespace and of all).
// Results are JSON lines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	corev1 "k8s.io/api/core/v1"

	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var credentials = schema.GroupVersionResource{Group: "kubeos.dev", Version: "v1alpha1", Resource: "credentials"}

func main() {
	kube := flag.String("kube", "", "the kube binary (go build -o kube ./cmd/kube)")
	dependents := flag.Int("dependents", 1000, "Credentials depending on the tree's root")
	objects := flag.Int("objects", 100000, "managed objects in all (health)")
	namespaces := flag.Int("namespaces", 20, "namespaces the objects spread over")
	clients := flag.Int("clients", 32, "concurrent creating clients")
	runs := flag.Int("runs", 5, "timed runs of each command")
	flag.Parse()
	if *kube == "" {
		fmt.Fprintln(os.Stderr, "ctlbench: -kube is required")
		os.Exit(2)
	}
	if err := run(*kube, *dependents, *objects, *namespaces, *clients, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "ctlbench:", err)
		os.Exit(1)
	}
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func run(kube string, dependents, objects, namespaces, clients, runs int) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ts, err := servertest.StartWith(filepath.Join(dir, "kube"), nil, func(o *server.Options) {
		o.NoEngine = true
		// Creating 100,000 objects on a loaded machine is bound by etcd's fsyncs (creates timed
		// out at 56,150 with them): the bench measures reads, so the member skips them.
		o.EtcdUnsafeNoFsync = true
	})
	if err != nil {
		return err
	}
	defer ts.Stop()
	cfg, err := ts.Config()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := 0; i < namespaces; i++ {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	cred := func(ns, name string, deps ...string) *unstructured.Unstructured {
		spec := map[string]any{"type": "password"}
		if len(deps) > 0 {
			var d []any
			for _, n := range deps {
				d = append(d, map[string]any{"kind": "Credential", "name": n})
			}
			spec["dependsOn"] = d
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Credential",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
	}
	// The tree: root and its dependents in bench-0; the rest spread over all namespaces.
	start := time.Now()
	if _, err := dc.Resource(credentials).Namespace("bench-0").Create(ctx, cred("bench-0", "root"), metav1.CreateOptions{}); err != nil {
		return err
	}
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	total := max(objects, dependents+1)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i >= total {
					return
				}
				var o *unstructured.Unstructured
				if i <= dependents {
					o = cred("bench-0", fmt.Sprintf("dep-%d", i), "root")
				} else {
					o = cred(fmt.Sprintf("bench-%d", i%namespaces), fmt.Sprintf("obj-%d", i))
				}
				// The loaded machine's etcd times out now and then: retry, a create that went
				// through answers AlreadyExists.
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if _, err = dc.Resource(credentials).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					time.Sleep(time.Second)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	emit(map[string]any{"step": "created", "objects": total, "seconds": time.Since(start).Seconds()})
	// Wait until the server's aggregates count them all.
	ops, err := opsClient(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var l opsapi.HealthList
		raw, err := ops.Get().Resource(opsapi.ResourceHealths).Param("kind", "Credential").Do(ctx).Raw()
		if err == nil && json.Unmarshal(raw, &l) == nil && len(l.Items) == 1 && l.Items[0].Total >= total {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the aggregates did not reach %d objects: %v %s", total, err, raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// childCPU sums the CPU time of the kube ctl processes a step ran.
	var childCPU time.Duration
	timeAPI := func(name string, f func() error) error {
		var ds []time.Duration
		childCPU = 0
		self0 := selfCPU()
		for i := 0; i < runs; i++ {
			t0 := time.Now()
			if err := f(); err != nil {
				return err
			}
			ds = append(ds, time.Since(t0))
		}
		self := selfCPU() - self0
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		emit(map[string]any{"step": name, "objects": total, "dependents": dependents, "runs": runs,
			"min_ms": ms(ds[0]), "median_ms": ms(ds[len(ds)/2]), "max_ms": ms(ds[len(ds)-1]),
			// The server runs in this process: its CPU per run (with the bench's own client side).
			"server_cpu_ms_per_run": ms(self / time.Duration(runs)), "ctl_cpu_ms_per_run": ms(childCPU / time.Duration(runs))})
		return nil
	}
	home := filepath.Join(dir, "home")
	cli := func(args ...string) func() error {
		return func() error {
			cmd := exec.Command(kube, append([]string{"ctl", "--kubeconfig", ts.Kubeconfig}, args...)...)
			cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
			out, err := cmd.CombinedOutput()
			if cmd.ProcessState != nil {
				childCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 && args[0] == "health" {
				err = nil // unhealthy is an answer
			}
			if err != nil {
				return fmt.Errorf("kube ctl %v: %v\n%s", args, err, out)
			}
			return nil
		}
	}
	if err := cli("health", "-A")(); err != nil { // warm the discovery cache as a user's second run
		return err
	}
	steps := []struct {
		name string
		f    func() error
	}{
		{"api: graph, dependents of root", func() error {
			_, err := ops.Get().Namespace("bench-0").Resource(opsapi.ResourceGraphs).Name("root").Param("kind", "Credential").Param("direction", "dependents").Do(ctx).Raw()
			return err
		}},
		{"api: healths, all namespaces", func() error {
			_, err := ops.Get().Resource(opsapi.ResourceHealths).Do(ctx).Raw()
			return err
		}},
		{"api: objects, one namespace, phase=Pending sorted by -age, 50", func() error {
			_, err := ops.Get().Namespace("bench-1").Resource(opsapi.ResourceObjects).Param("kind", "Credential").
				Param("phase", "Pending").Param("sort", "-age").Param("limit", "50").Do(ctx).Raw()
			return err
		}},
		{"api: objects, all namespaces, sorted by -age, 50", func() error {
			_, err := ops.Get().Resource(opsapi.ResourceObjects).Param("kind", "Credential").Param("sort", "-age").Param("limit", "50").Do(ctx).Raw()
			return err
		}},
		{"kube ctl tree credential/root -D (process)", cli("tree", "credential/root", "-n", "bench-0", "-D")},
		{"kube ctl health -A (process)", cli("health", "-A")},
	}
	for _, s := range steps {
		if err := timeAPI(s.name, s.f); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// selfCPU is this process's CPU time so far (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func opsClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{Group: opsapi.Group, Version: opsapi.Version}
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(c)
}
