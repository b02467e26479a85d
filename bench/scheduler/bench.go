package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// shape is one scheduler_perf workload (test/integration/scheduler_perf in
// k8s.io/kubernetes v1.37.2): node-default nodes (4 CPU, 32Gi, 110 pods, Ready) with zone
// labels, initial pods already on the nodes, and the measured pods, all pending when the
// scheduler starts.
type shape struct {
	zones                 []string // topology.kubernetes.io/zone values, round robin
	initNS, ns            string   // namespaces of the initial and the measured pods
	init, pod             func(ns string, i int) *corev1.Pod
	nodes, initPods, pods int // the defaults
}

// antiAffinityPod is templates/pod-with-pod-anti-affinity.yaml.
func antiAffinityPod(ns string, i int) *corev1.Pod {
	p := perfPod(ns, fmt.Sprintf("anti-affinity-pod-%d", i))
	p.Labels = map[string]string{"color": "green"}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"sched-1", "sched-0"},
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "green"}}}}}}
	return p
}

func defaultPod(ns string, i int) *corev1.Pod { return perfPod(ns, fmt.Sprintf("pod-%d", i)) }

// perfPod is templates/pod-default.yaml: pause, port 80, 100m CPU and 500Mi requested and
// limited.
func perfPod(ns, name string) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10.2",
			Ports: []corev1.ContainerPort{{ContainerPort: 80}}, Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}}}
}

var shapes = map[string]shape{
	// SchedulingBasic (misc/performance-config.yaml, 5000Nodes_10000Pods): 1,000 initial
	// and 10,000 measured pod-default pods on 5,000 node-default nodes.
	"basic": {zones: []string{"zone-0"}, initNS: "bench", ns: "bench", init: defaultPod, pod: defaultPod,
		nodes: 5000, initPods: 1000, pods: 10000},
	// TopologySpreading (topology_spreading/performance-config.yaml): nodes labelled
	// moon-1..3, initial pod-default pods, measured pod-with-topology-spreading pods (maxSkew
	// 5 over zones, DoNotSchedule). 1,000 nodes with 1,000 + 1,000 pods (500Nodes has
	// 1,000 + 1,000, 5000Nodes_5000Pods 5,000 + 5,000).
	"spread": {zones: []string{"moon-1", "moon-2", "moon-3"}, initNS: "bench", ns: "bench", init: defaultPod,
		pod: func(ns string, i int) *corev1.Pod {
			p := perfPod(ns, fmt.Sprintf("spreading-pod-%d", i))
			p.Labels = map[string]string{"color": "blue"}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 5, TopologyKey: "topology.kubernetes.io/zone",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}}}}
			return p
		},
		nodes: 1000, initPods: 1000, pods: 1000},
	// SchedulingPodAntiAffinity (affinity/performance-config.yaml): initial pods in
	// sched-0, measured in sched-1, all pod-with-pod-anti-affinity (required, hostname,
	// both namespaces), so at most one per node. 1,000 nodes with 200 + 800 pods (500Nodes
	// has 100 + 400: every node gets one).
	"antiaffinity": {zones: []string{"zone-0"}, initNS: "sched-0", ns: "sched-1", init: antiAffinityPod, pod: antiAffinityPod,
		nodes: 1000, initPods: 200, pods: 800},
}

type runResult struct {
	podsPerSec, wallSecs float64
	// CPU seconds from the first to the last binding, and over the scheduler's whole run
	// (its start, informer lists included).
	serverCPU, schedCPU, schedCPUTotal float64
	load                               string // load average at the start and end of the scheduler's run
}

func bench(dir string, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	name := fs.String("shape", "basic", "basic | spread | antiaffinity")
	nodes := fs.Int("nodes", 0, "nodes (0: the shape's)")
	initPods := fs.Int("init-pods", -1, "initial pods, created bound (-1: the shape's)")
	pods := fs.Int("pods", 0, "measured pods (0: the shape's)")
	only := fs.String("only", "", "run only kube or peer")
	which := fs.String("schedulers", "peer,kube", "the schedulers to run, in order: peer (kube-scheduler), kube, kube-nocache (Kube's scheduler with its equivalence cache off)")
	shared := fs.Bool("shared", true, "one server for both schedulers, one after the other, each with its own namespace of measured pods (not for antiaffinity: the first run's pods would repel the second's)")
	profile := fs.String("cpuprofile", "", "kube's run: write its scheduler's CPU profile here")
	port := fs.Int("port", 16443, "the servers' ports: this one and the next")
	identity := fs.String("identity", "scheduler", "whom both schedulers authenticate as: scheduler (system:kube-scheduler: RBAC's system:kube-scheduler role, API priority and fairness level workload-high, as deployed) or admin (system:masters: exempt from priority and fairness)")
	_ = fs.Parse(args)
	sh, ok := shapes[*name]
	if !ok {
		return fmt.Errorf("unknown shape %q", *name)
	}
	if *nodes > 0 {
		sh.nodes = *nodes
	}
	if *initPods >= 0 {
		sh.initPods = *initPods
	}
	if *pods > 0 {
		sh.pods = *pods
	}
	if *identity != "scheduler" && *identity != "admin" {
		return fmt.Errorf("unknown -identity %q", *identity)
	}
	if *name == "antiaffinity" {
		*shared = false
	}
	res := map[string]runResult{}
	var s *server
	for i, who := range strings.Split(*which, ",") {
		if *only != "" && *only != who {
			continue
		}
		if s == nil || !*shared {
			if s != nil {
				s.proc.stop()
			}
			var err error
			if s, err = setup(filepath.Join(dir, who), *port+i, sh); err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
		}
		ns := sh.ns
		if *shared {
			ns = sh.ns + "-" + who
		}
		kubeconfig := s.kubeconfig()
		if *identity == "scheduler" {
			var err error
			if kubeconfig, err = s.schedulerKubeconfig(); err != nil {
				s.proc.stop()
				return err
			}
		}
		r, err := measure(s, who, ns, sh, kubeconfig, *profile)
		if err != nil {
			s.proc.stop()
			return fmt.Errorf("%s: %w", who, err)
		}
		res[who] = r
		fmt.Printf("%s: %d pods on %d nodes with %d (%s): %.1f pods/s (%.1f s first to last bind); in that time server CPU %.1f s, scheduler CPU %.1f s (%.2f ms/pod); scheduler process total %.1f s; load average %s\n",
			who, sh.pods, sh.nodes, sh.initPods, *name, r.podsPerSec, r.wallSecs, r.serverCPU, r.schedCPU, 1000*r.schedCPU/float64(sh.pods), r.schedCPUTotal, r.load)
	}
	if s != nil {
		s.proc.stop()
	}
	k, p, o := res["kube"], res["peer"], res["kube-nocache"]
	if k.podsPerSec > 0 && o.podsPerSec > 0 {
		fmt.Printf("throughput ratio kube/kube-nocache: %.2f×; scheduler CPU per pod (first to last bind) ratio %.2f×\n",
			k.podsPerSec/o.podsPerSec, k.schedCPU/o.schedCPU)
	}
	if k.podsPerSec > 0 && p.podsPerSec > 0 {
		fmt.Printf("throughput ratio kube/kube-scheduler: %.2f×\n", k.podsPerSec/p.podsPerSec)
		fmt.Printf("scheduler CPU per pod (first to last bind): kube %.2f ms, kube-scheduler %.2f ms; ratio %.2f×\n",
			1000*k.schedCPU/float64(sh.pods), 1000*p.schedCPU/float64(sh.pods), k.schedCPU/p.schedCPU)
		fmt.Printf("scheduler CPU per pod (whole process): kube %.2f ms, kube-scheduler %.2f ms; ratio %.2f×\n",
			1000*k.schedCPUTotal/float64(sh.pods), 1000*p.schedCPUTotal/float64(sh.pods), k.schedCPUTotal/p.schedCPUTotal)
	}
	return nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// setup starts a server (--scheduler=false, no controllers) with the shape's nodes and initial pods, the
// latter created bound round robin (as LeastAllocated would spread them).
func setup(dir string, port int, sh shape) (*server, error) {
	s, err := startServer(dir, port, false, noControllers...)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := ensureNamespace(ctx, s.cs, sh.initNS); err != nil {
		s.proc.stop()
		return nil, err
	}
	t := time.Now()
	err = parallel(sh.nodes, 32, func(i int) error {
		return createNode(ctx, s.cs, node(fmt.Sprintf("node-%d", i), sh.zones[i%len(sh.zones)], "4", "32Gi", nil, nil))
	})
	if err == nil {
		fmt.Printf("%d nodes in %.1f s\n", sh.nodes, time.Since(t).Seconds())
		t = time.Now()
		err = parallel(sh.initPods, 32, func(i int) error {
			p := sh.init(sh.initNS, i)
			p.Name = "init-" + p.Name
			p.Spec.NodeName = fmt.Sprintf("node-%d", i%sh.nodes)
			_, err := s.cs.CoreV1().Pods(sh.initNS).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		fmt.Printf("%d initial pods in %.1f s\n", sh.initPods, time.Since(t).Seconds())
	}
	if err != nil {
		s.proc.stop()
		return nil, err
	}
	return s, nil
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// measure creates the measured pods in ns (all pending: no scheduler runs), starts the
// scheduler as its own process through kubeconfig (kube-scheduler, or this program's sched command), times
// the first to the last binding and samples both processes' CPU at those points.
func measure(s *server, who, ns string, sh shape, kubeconfig, profile string) (runResult, error) {
	var r runResult
	ctx := context.Background()
	if err := ensureNamespace(ctx, s.cs, ns); err != nil {
		return r, err
	}
	t := time.Now()
	err := parallel(sh.pods, 32, func(i int) error {
		_, err := s.cs.CoreV1().Pods(ns).Create(ctx, sh.pod(ns, i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return r, err
	}
	fmt.Printf("%s: %d pods in %.1f s\n", who, sh.pods, time.Since(t).Seconds())
	list, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	var sp *proc
	load0 := loadavg()
	if who == "peer" {
		sp, err = startPeer(s, kubeconfig)
	} else {
		var self string
		if self, err = os.Executable(); err == nil {
			args := []string{"sched", "-kubeconfig", kubeconfig}
			if who == "kube-nocache" {
				args = append(args, "-no-equiv")
			}
			if profile != "" {
				args = append(args, "-cpuprofile", profile)
			}
			sp, err = start(s.dir, who+"-sched", self, args...)
		}
	}
	if err != nil {
		return r, err
	}
	defer sp.stop()
	var cpu0, srv0 float64
	first, last, err := waitBound(ctx, s.cs, ns, list.ResourceVersion, sh.pods, 30*time.Minute, func() { cpu0, srv0 = sp.cpu(), s.proc.cpu() })
	if err != nil {
		return r, err
	}
	r.schedCPUTotal = sp.cpu()
	r.schedCPU, r.serverCPU = r.schedCPUTotal-cpu0, s.proc.cpu()-srv0
	r.load = load0 + " → " + loadavg()
	r.wallSecs = last.Sub(first).Seconds()
	if r.wallSecs > 0 {
		r.podsPerSec = float64(sh.pods-1) / r.wallSecs
	}
	return r, nil
}

// waitBound watches the pods of ns from rv until n are bound, returning the times of the
// first and last binding seen; atFirst runs at the first.
func waitBound(ctx context.Context, cs kubernetes.Interface, ns, rv string, n int, timeout time.Duration, atFirst func()) (first, last time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bound := map[string]bool{}
	for len(bound) < n {
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			// The watch fell out of the server's window (a loaded machine): a list finds
			// the pods bound meanwhile (their binding time taken as now) and the watch
			// resumes from it.
			list, lerr := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if lerr != nil {
				return first, last, lerr
			}
			now := time.Now()
			for i := range list.Items {
				if p := &list.Items[i]; p.Spec.NodeName != "" && !bound[p.Name] {
					bound[p.Name] = true
					if first.IsZero() {
						first = now
						atFirst()
					}
					last = now
				}
			}
			rv = list.ResourceVersion
			continue
		}
		if err != nil {
			return first, last, err
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if (ev.Type == watch.Added || ev.Type == watch.Modified) && p.Spec.NodeName != "" && !bound[p.Name] {
				bound[p.Name] = true
				now := time.Now()
				if first.IsZero() {
					first = now
					atFirst()
				}
				last = now
				if len(bound) == n {
					break
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return first, last, errors.New("timed out: " + fmt.Sprint(len(bound)) + " of " + fmt.Sprint(n) + " pods bound")
		}
	}
	return first, last, nil
}
