// Command deployments measures the workload controllers and the scheduler in the shape of
// issue 15's first performance goal: DEPLOYMENTS Deployments of REPLICAS replicas each are
// created (phase "create": until every one is Available, as `kubectl rollout status` judges
// it), then every one's pod template is changed (phase "rollout": a rolling update with the
// default maxSurge/maxUnavailable of 25 %, until every one is Available again on the new
// template). Whatever controllers and scheduler serve the cluster (Kube's in-process ones, or
// kube-controller-manager and kube-scheduler pointed at it) are what is measured; the pods
// run on simulated nodes started beside it (`kube sim`, or `kube server --sim-nodes`).
//
// With -pids name=PID,... it reads each process's CPU seconds (utime+stime from
// /proc/PID/stat) at the start and at the end of each phase, and its RSS (VmRSS, VmHWM)
// at the end. With -profile-dir it records the server's CPU profile over both phases in
// consecutive 20-s pieces (/debug/pprof/profile), for `go tool pprof` to merge.
//
// It prints one JSON line: the wall time of each phase and, per process, its CPU seconds in
// each phase and its RSS. bench/deployments/run.sh runs it against both sides.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	ns     = "bench-deploy"
	revKey = "bench.kubeos.dev/rev"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	deployments := flag.Int("deployments", 1000, "Deployments")
	replicas := flag.Int("replicas", 10, "replicas of each Deployment")
	writers := flag.Int("writers", 32, "concurrent creates and patches")
	timeout := flag.Duration("timeout", 60*time.Minute, "how long each phase may take")
	pidsFlag := flag.String("pids", "", "processes to account: name=PID,name=PID")
	profileDir := flag.String("profile-dir", "", "write the server's CPU profile here in 20-s pieces")
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
	pids := parsePids(*pidsFlag)

	// Watch the Deployments and keep, per Deployment, whether it is done for the current phase.
	var phase atomic.Int32 // 1 create, 2 rollout
	var mu sync.Mutex
	done := map[string]bool{}
	changed := make(chan struct{}, 1)
	judge := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		ok = complete(d, int32(*replicas)) && (phase.Load() < 2 || d.Spec.Template.Annotations[revKey] == "2")
		mu.Lock()
		if done[d.Name] != ok {
			done[d.Name] = ok
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		mu.Unlock()
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Apps().V1().Deployments().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: judge, UpdateFunc: func(_, o any) { judge(o) }}); err != nil {
		log.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		log.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	wait := func(name string, start time.Time) time.Duration {
		deadline := time.After(*timeout)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			mu.Lock()
			n := 0
			for _, ok := range done {
				if ok {
					n++
				}
			}
			mu.Unlock()
			if n >= *deployments {
				return time.Since(start)
			}
			select {
			case <-changed:
			case <-tick.C:
				log.Printf("%s: %d of %d Deployments done after %s", name, n, *deployments, time.Since(start).Round(time.Second))
			case <-deadline:
				log.Fatalf("%s: %d of %d Deployments done after %s", name, n, *deployments, *timeout)
			}
		}
	}

	stopProfile := func() {}
	if *profileDir != "" {
		stopProfile = profile(ctx, cs, *profileDir)
	}
	out := map[string]any{"label": *label, "deployments": *deployments, "replicas": *replicas}
	cpu0 := readCPU(pids)

	// phase 1: create, until all Available
	phase.Store(1)
	start := time.Now()
	parallel(*writers, *deployments, func(i int) error {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(fmt.Sprintf("web-%d", i), int32(*replicas)), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	out["create_writes_s"] = time.Since(start).Seconds()
	out["create_s"] = wait("create", start).Seconds()
	cpu1 := readCPU(pids)
	out["create_cpu_s"] = diff(cpu0, cpu1)
	out["create_rss_mib"] = readRSS(pids, "VmRSS")
	out["create_load"] = loadavg()
	log.Printf("create: all Available after %.1f s", out["create_s"])

	// phase 2: change every pod template, until all Available on it
	mu.Lock()
	clear(done)
	mu.Unlock()
	phase.Store(2)
	start = time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"2"}}}}}`, revKey))
	parallel(*writers, *deployments, func(i int) error {
		_, err := cs.AppsV1().Deployments(ns).Patch(ctx, fmt.Sprintf("web-%d", i), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	// Judge every cached Deployment again: one whose patch arrived before phase 2 began
	// counting would otherwise wait for its next event.
	for _, o := range inf.GetStore().List() {
		judge(o)
	}
	out["rollout_writes_s"] = time.Since(start).Seconds()
	out["rollout_s"] = wait("rollout", start).Seconds()
	cpu2 := readCPU(pids)
	stopProfile()
	out["rollout_cpu_s"] = diff(cpu1, cpu2)
	out["total_cpu_s"] = diff(cpu0, cpu2)
	out["rss_mib"] = readRSS(pids, "VmRSS")
	out["peak_rss_mib"] = readRSS(pids, "VmHWM")
	out["rollout_load"] = loadavg()
	out["total_s"] = out["create_s"].(float64) + out["rollout_s"].(float64)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

// complete is `kubectl rollout status`'s test of a finished rollout (its Deployment status
// viewer) with every replica available: the controller saw the current spec, every replica
// runs the current template, no old replica is left, and all are available.
func complete(d *appsv1.Deployment, replicas int32) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == replicas && s.Replicas == replicas &&
		s.AvailableReplicas == replicas
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:v1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}},
			},
		},
	}
}

// profile fetches the server's CPU profile in 20-s pieces into dir until the returned
// function is called (which waits for the piece in flight).
func profile(ctx context.Context, cs kubernetes.Interface, dir string) func() {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			b, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "20").DoRaw(context.WithoutCancel(ctx))
			if err != nil {
				log.Printf("profile: %v", err)
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("cpu-%03d.pb.gz", i)), b, 0o644); err != nil {
				log.Printf("profile: %v", err)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

func parsePids(s string) map[string]int {
	m := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		name, pid, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil {
			log.Fatalf("-pids: %q is not name=PID", kv)
		}
		m[name] = n
	}
	return m
}

// readCPU is each process's utime+stime in seconds (USER_HZ 100).
func readCPU(pids map[string]int) map[string]float64 {
	m := map[string]float64{}
	for name, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			log.Printf("cpu of %s: %v", name, err)
			continue
		}
		// Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		m[name] = (u + s) / 100
	}
	return m
}

func diff(a, b map[string]float64) map[string]float64 {
	m := map[string]float64{}
	for k, v := range b {
		m[k] = v - a[k]
	}
	return m
}

// readRSS reads a /proc/PID/status field in kB and returns MiB per process.
func readRSS(pids map[string]int, field string) map[string]float64 {
	m := map[string]float64{}
	for name, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m[name] = kb / 1024
			}
		}
	}
	return m
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
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
