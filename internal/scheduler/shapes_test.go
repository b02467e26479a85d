package scheduler

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// benchShape is one of scheduler_perf's workloads (bench/scheduler's shapes) without the
// API: node-default nodes, initial pods bound round robin, then measured pods scheduled one
// after another, each assumed on its node and then confirmed bound as the informer would
// (a copy with another resourceVersion replacing the assumed pod).
type benchShape struct {
	name        string
	nodes, init int
	zones       []string
	// pod is the i-th measured pod; initPod the i-th initial one.
	pod, initPod func(i int) *v1.Pod
	// room: how many measured pods fit before the measured ones are taken off again.
	room int
}

// perfPod is scheduler_perf's pod-default: pause, port 80, 100m and 500Mi requested and
// limited.
func perfPod(ns, name string) *v1.Pod {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), ResourceVersion: "1"},
		Spec: v1.PodSpec{SchedulerName: "default-scheduler", Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10.2",
			Ports: []v1.ContainerPort{{ContainerPort: 80}}, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}}}}
}

func spreadPod(i int) *v1.Pod {
	p := perfPod("bench", fmt.Sprint("spreading-pod-", i))
	p.Labels = map[string]string{"color": "blue"}
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 5, TopologyKey: "topology.kubernetes.io/zone",
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}}}}
	return p
}

func antiAffinityPod(ns string, i int) *v1.Pod {
	p := perfPod(ns, fmt.Sprint("anti-affinity-pod-", i))
	p.Labels = map[string]string{"color": "green"}
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"sched-1", "sched-0"},
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "green"}}}}}}
	return p
}

var benchShapes = []benchShape{
	{name: "basic-5000", nodes: 5000, init: 1000, zones: []string{"zone-0"}, room: 150000,
		pod:     func(i int) *v1.Pod { return perfPod("bench", fmt.Sprint("pod-", i)) },
		initPod: func(i int) *v1.Pod { return perfPod("bench", fmt.Sprint("init-pod-", i)) }},
	{name: "spread-1000", nodes: 1000, init: 1000, zones: []string{"moon-1", "moon-2", "moon-3"}, room: 30000,
		pod:     spreadPod,
		initPod: func(i int) *v1.Pod { return perfPod("bench", fmt.Sprint("init-pod-", i)) }},
	{name: "antiaffinity-1000", nodes: 1000, init: 200, zones: []string{"zone-0"}, room: 800,
		pod:     func(i int) *v1.Pod { return antiAffinityPod("sched-1", i) },
		initPod: func(i int) *v1.Pod { return antiAffinityPod("sched-0", i) }},
}

// BenchmarkCycle is scheduler_perf's SchedulingBasic (5,000 nodes), TopologySpreading and
// SchedulingPodAntiAffinity (1,000 nodes) cycles without the API, with the equivalence
// cache off and on; cpu-ms/op is the process's CPU time per pod (the machine may be
// shared: ns/op says little).
//
//	go test -run '^$' -bench Cycle -benchmem ./internal/scheduler/
func BenchmarkCycle(b *testing.B) {
	for _, sh := range benchShapes {
		for _, cached := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/cache=%v", sh.name, cached), func(b *testing.B) { benchShapeCycle(b, sh, cached) })
		}
	}
}

func benchShapeCycle(b *testing.B, sh benchShape, cached bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := &testing.T{}
	h := newHarness(t, ctx, cached, parallelism(16))
	for i := range sh.nodes {
		name := fmt.Sprintf("node-%d", i)
		n := st.MakeNode().Name(name).Label("kubernetes.io/hostname", name).Label("kubernetes.io/os", "linux").
			Label("topology.kubernetes.io/zone", sh.zones[i%len(sh.zones)]).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "32Gi", v1.ResourcePods: "110"}).Obj()
		h.kc.setNode(n)
	}
	for i := range sh.init {
		h.kc.addPod(bound(sh.initPod(i), fmt.Sprintf("node-%d", i%sh.nodes)))
	}
	var placed []*v1.Pod
	b.ResetTimer()
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op") }()
	for i := range b.N {
		if len(placed) == sh.room {
			b.StopTimer()
			for _, p := range placed {
				h.kc.removePod(p)
			}
			placed = placed[:0]
			b.StartTimer()
		}
		pod := sh.pod(i)
		res, s := h.cycle(ctx, pod)
		if !s.IsSuccess() {
			b.Fatal(s)
		}
		if err := h.kc.assume(bound(pod.DeepCopy(), res.host)); err != nil {
			b.Fatal(err)
		}
		confirmed := bound(pod.DeepCopy(), res.host)
		confirmed.ResourceVersion = "2"
		h.kc.addPod(confirmed)
		placed = append(placed, confirmed)
	}
}
