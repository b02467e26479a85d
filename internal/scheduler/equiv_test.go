package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/clock"
)

// harness is a scheduling loop without informers or API: Kube's cache, snapshot, queue
// (the nominator) and upstream's default profile, fed directly.
type harness struct {
	r  *run
	kc *nodeCache
	q  *queue
	f  framework.Framework
}

func newHarness(t *testing.T, ctx context.Context, cached bool, parallelism int) *harness {
	t.Helper()
	kc, snap := newNodeCache(), newSnapshot()
	q := newQueue(func(a, b fwk.QueuedEntityInfo) bool { return false }, nil, clock.RealClock{}, nil)
	f, pp := newFrameworkPlugins(t, ctx, snap, q, frameworkruntime.WithParallelism(parallelism))
	r := &run{log: discardLog(), profiles: map[string]framework.Framework{"default-scheduler": f}, cache: kc, snap: snap, queue: q}
	if cached {
		r.equiv = newEquivCache()
		r.equiv.register("default-scheduler", pp)
	}
	return &harness{r: r, kc: kc, q: q, f: f}
}

// cycle brings the snapshot up to date and runs the scheduling algorithm for pod.
func (h *harness) cycle(ctx context.Context, pod *v1.Pod) (result, *fwk.Status) {
	h.kc.updateSnapshot(h.r.snap)
	return h.r.algorithm(ctx, h.f, framework.NewCycleState(), &framework.QueuedPodInfo{PodInfo: podInfo(pod)})
}

type counts struct{ fh, fm, sh, sm int64 }

func (h *harness) counts() counts {
	c := h.r.equiv
	return counts{c.filterHits.Load(), c.filterMisses.Load(), c.scoreHits.Load(), c.scoreMisses.Load()}
}

func (c counts) sub(o counts) counts {
	return counts{c.fh - o.fh, c.fm - o.fm, c.sh - o.sh, c.sm - o.sm}
}

func plainPod(name, cpu string) *st.PodWrapper {
	return st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName("default-scheduler").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "500Mi"})
}

func TestPodSignature(t *testing.T) {
	withVolume := func(p *v1.Pod, vol string) *v1.Pod {
		p.Spec.Volumes = []v1.Volume{{Name: vol, VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: vol, MountPath: "/var/run/secrets"}}
		return p
	}
	base := podSignature(plainPod("a", "100m").Obj())
	if base == nil {
		t.Fatal("a plain pod has no signature")
	}
	same := map[string]*v1.Pod{
		"another name and uid":                      plainPod("b", "100m").Obj(),
		"a service account volume of its own":       withVolume(plainPod("c", "100m").Obj(), "kube-api-access-x1"),
		"a PodScheduled=False condition of a retry": st.MakePod().Namespace("ns").Name("d").UID("d").SchedulerName("default-scheduler").Req(map[v1.ResourceName]string{v1.ResourceCPU: "100m", v1.ResourceMemory: "500Mi"}).Condition(v1.PodScheduled, v1.ConditionFalse, v1.PodReasonUnschedulable).Obj(),
	}
	for what, p := range same {
		if got := podSignature(p); string(got) != string(base) {
			t.Errorf("%s: signature differs", what)
		}
	}
	differ := map[string]*v1.Pod{
		"another request":   plainPod("a", "200m").Obj(),
		"another namespace": plainPod("a", "100m").Namespace("other").Obj(),
		"a label":           plainPod("a", "100m").Label("app", "x").Obj(),
		"a node selector":   plainPod("a", "100m").NodeSelector(map[string]string{"disk": "ssd"}).Obj(),
		"a toleration":      plainPod("a", "100m").Toleration("k").Obj(),
		"a host port":       plainPod("a", "100m").HostPort(8080).Obj(),
		"an image":          plainPod("a", "100m").Container("img:2").Obj(),
		"a priority":        plainPod("a", "100m").Priority(5).Obj(),
		"pod anti-affinity": plainPod("a", "100m").PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithRequiredReq).Obj(),
		"pod affinity":      plainPod("a", "100m").PodAffinityExists("app", "kubernetes.io/hostname", st.PodAffinityWithPreferredReq).Obj(),
		"topology spread":   plainPod("a", "100m").SpreadConstraint(1, "topology.kubernetes.io/zone", v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).Obj(),
	}
	for what, p := range differ {
		if got := podSignature(p); got == nil || string(got) == string(base) {
			t.Errorf("%s: signature equal or missing", what)
		}
	}
	unsigned := map[string]*v1.Pod{
		"a claim":              plainPod("a", "100m").PVC("data").Obj(),
		"a nominated node":     plainPod("a", "100m").NominatedNodeName("n-1").Obj(),
		"an extended resource": plainPod("a", "100m").Req(map[v1.ResourceName]string{"example.com/gpu": "1"}).Obj(),
		"a resize condition":   plainPod("a", "100m").Condition(v1.PodResizePending, v1.ConditionTrue, "").Obj(),
		"a resource claim": func() *v1.Pod {
			p := plainPod("a", "100m").Obj()
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "c"}}
			return p
		}(),
		"a hostPath volume": func() *v1.Pod {
			p := plainPod("a", "100m").Obj()
			p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}}
			return p
		}(),
		"an ephemeral volume": func() *v1.Pod {
			p := plainPod("a", "100m").Obj()
			p.Spec.Volumes = []v1.Volume{{Name: "e", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}
			return p
		}(),
		"a scheduled pod": bound(plainPod("a", "100m").Obj(), "n-1"),
	}
	for what, p := range unsigned {
		if got := podSignature(p); got != nil {
			t.Errorf("%s: signed", what)
		}
	}
}

// TestEquivCacheReuse: a second pod of the same signature reuses every node's verdict and
// raw scores; a node that changed (the first pod assumed on it) is filtered and scored
// again; a change of signature or of the node list starts afresh; a node with a nominated
// pod is filtered without the cache; plugins that read cluster-wide state run every cycle
// beside the cached ones.
func TestEquivCacheReuse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, ctx, true, 1)
	const n = 10
	for i := range n {
		h.kc.setNode(zoneNode(fmt.Sprintf("n-%d", i), []string{"a", "b", "c"}[i%3], "4"))
	}
	step := func(what string, pod *v1.Pod, want counts) string {
		t.Helper()
		before := h.counts()
		res, s := h.cycle(ctx, pod)
		if !s.IsSuccess() {
			t.Fatalf("%s: %v", what, s)
		}
		if got := h.counts().sub(before); got != want {
			t.Errorf("%s: filter hits/misses, score hits/misses %+v, want %+v", what, got, want)
		}
		return res.host
	}
	assume := func(p *v1.Pod, host string) {
		t.Helper()
		if err := h.kc.assume(bound(p, host)); err != nil {
			t.Fatal(err)
		}
	}
	step("first pod", plainPod("p0", "100m").Obj(), counts{0, n, 0, n})
	step("same signature, nothing changed", plainPod("p1", "100m").Obj(), counts{n, 0, n, 0})
	p2 := plainPod("p2", "100m").Obj()
	host := step("same again", p2, counts{n, 0, n, 0})
	assume(p2, host)
	step("after an assumption: that node only", plainPod("p3", "100m").Obj(), counts{n - 1, 1, n - 1, 1})

	step("another signature", plainPod("q0", "200m").Obj(), counts{0, n, 0, n})
	step("the first signature again (consecutive pods only)", plainPod("p4", "100m").Obj(), counts{0, n, 0, n})

	changed := zoneNode("n-4", "b", "8")
	h.kc.setNode(changed)
	step("a node's capacity changed", plainPod("p5", "100m").Obj(), counts{n - 1, 1, n - 1, 1})
	h.kc.setNode(zoneNode("n-10", "c", "4"))
	step("a node added", plainPod("p6", "100m").Obj(), counts{0, n + 1, 0, n + 1})
	step("settled", plainPod("p7", "100m").Obj(), counts{n + 1, 0, n + 1, 0})

	h.q.AddNominatedPod(logger, podInfo(plainPod("nom", "100m").Obj()), &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "n-2"})
	step("a pod nominated to one node", plainPod("p8", "100m").Obj(), counts{n, 0, n + 1, 0})
	h.q.DeleteNominatedPodIfExists(plainPod("nom", "100m").Obj())

	// An existing pod whose required anti-affinity matches the incoming pods: the
	// InterPodAffinity filter runs on every node every cycle (zone a's four nodes fail it),
	// the cacheable plugins' verdicts and scores are still reused.
	anti := bound(plainPod("anti", "100m").PodAntiAffinityExists("app", "topology.kubernetes.io/zone", st.PodAntiAffinityWithRequiredReq).Obj(), "n-0")
	h.kc.addPod(anti)
	step("existing anti-affinity applies", plainPod("g0", "100m").Label("app", "g").Obj(), counts{0, n + 1, 0, n + 1 - 4})
	step("and again", plainPod("g1", "100m").Label("app", "g").Obj(), counts{n + 1, 0, n + 1 - 4, 0})
	h.kc.removePod(anti)
	step("gone again: InterPodAffinity's PreFilter skips, another key", plainPod("g2", "100m").Label("app", "g").Obj(), counts{0, n + 1, 0, n + 1})
	step("cached", plainPod("g3", "100m").Label("app", "g").Obj(), counts{n + 1, 0, n + 1, 0})

	// Pods with constraints of their own: PodTopologySpread or InterPodAffinity run fresh.
	spread := func(name string) *v1.Pod {
		return plainPod(name, "100m").Label("app", "g").
			SpreadConstraint(1, "topology.kubernetes.io/zone", v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).Obj()
	}
	step("topology spread", spread("s0"), counts{0, n + 1, 0, n + 1})
	step("topology spread again", spread("s1"), counts{n + 1, 0, n + 1, 0})
	antiOwn := func(name string) *v1.Pod {
		return plainPod(name, "100m").Label("app", "g").
			PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithRequiredReq).Obj()
	}
	step("anti-affinity of its own", antiOwn("a0"), counts{0, n + 1, 0, n + 1})
	step("anti-affinity again", antiOwn("a1"), counts{n + 1, 0, n + 1, 0})
}

// TestEquivCacheSameDecisions runs random sequences of pods and cluster changes through two
// scheduling loops, one with the equivalence cache and one without, and requires the same
// decision for every pod: the chosen node, or the same FitError message, and the same next
// start of the node rotation. Filtering is sequential (parallelism 1) so that both visit
// the nodes in the same order; ties break the same way (the same scores in the same order).
func TestEquivCacheSameDecisions(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { sameDecisions(t, seed, 1) })
	}
}

// TestEquivCacheParallel: with parallel filtering (which upstream also runs, where the
// feasible set may differ by which worker gets there first), the cached loop's choice is
// still a best-scored feasible node by the plugins run afresh on the same snapshot. Run
// with -race to check the workers' entries.
func TestEquivCacheParallel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rng := rand.New(rand.NewPCG(42, 7))
	h := newHarness(t, ctx, true, 4)
	check := newFramework(t, ctx, h.r.snap, h.q)
	nodes := map[string]*v1.Node{}
	for i := range 40 {
		n := randomNode(rng, i)
		nodes[n.Name] = n
		h.kc.setNode(n)
	}
	for i := range 200 {
		pod := randomPod(rng, fmt.Sprint("p", i), (i/10)%numKinds)
		res, s := h.cycle(ctx, pod)
		want := decide(t, ctx, check, h.r.snap.list, pod)
		best := int64(-1)
		for _, d := range want {
			if d.code == fwk.Success {
				best = max(best, d.score)
			}
		}
		if best < 0 {
			if s.IsSuccess() {
				t.Fatalf("pod %d: nothing fits, yet chose %s", i, res.host)
			}
			continue
		}
		if !s.IsSuccess() {
			t.Fatalf("pod %d: %v", i, s)
		}
		if d := want[res.host]; d.code != fwk.Success || d.score != best {
			t.Fatalf("pod %d: chose %s (%+v), best score %d", i, res.host, d, best)
		}
		if err := h.kc.assume(bound(pod, res.host)); err != nil {
			t.Fatal(err)
		}
	}
	if c := h.counts(); c.fh == 0 || c.sh == 0 {
		t.Errorf("the cache was never used: %+v", c)
	}
}

var zones = []string{"a", "b", "c"}

func randomNode(rng *rand.Rand, i int) *v1.Node {
	name := fmt.Sprintf("n-%d", i)
	n := zoneNode(name, zones[rng.IntN(len(zones))], []string{"2", "4", "8"}[rng.IntN(3)])
	n.Labels["disk"] = []string{"ssd", "hdd"}[rng.IntN(2)]
	if rng.IntN(8) == 0 {
		n.Status.Capacity[v1.ResourcePods] = resourceQ("3")
		n.Status.Allocatable[v1.ResourcePods] = resourceQ("3")
	}
	switch rng.IntN(6) {
	case 0:
		n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
	case 1:
		n.Spec.Taints = []v1.Taint{{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}}
	}
	if rng.IntN(20) == 0 {
		n.Spec.Unschedulable = true
	}
	for _, img := range []string{"img-a:1", "img-b:1"} {
		if rng.IntN(3) == 0 {
			n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{img}, SizeBytes: int64(100+rng.IntN(900)) * 1024 * 1024})
		}
	}
	return n
}

// numKinds is randomPod's number of templates.
const numKinds = 11

// randomPod is one of a few templates (kind): the same kind gives the same signature.
func randomPod(rng *rand.Rand, name string, kind int) *v1.Pod {
	p := plainPod(name, "100m")
	switch kind {
	case 0:
		p = p.Container("img-a:1")
	case 1:
		p = plainPod(name, "500m").NodeSelector(map[string]string{"disk": "ssd"}).Toleration("k")
	case 2:
		p = plainPod(name, "200m").NodeAffinityIn("disk", []string{"hdd"}, st.NodeSelectorTypeMatchExpressions).Container("img-b:1")
		p.Obj().Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []v1.PreferredSchedulingTerm{{Weight: 5,
			Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}}}}
	case 3:
		p = p.HostPort(8080)
	case 4:
		p = p.Label("app", "g").PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithRequiredReq)
	case 5:
		p = p.Label("app", "f").SpreadConstraint(1, "topology.kubernetes.io/zone", v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil)
	case 6:
		p = plainPod(name, "3").Label("app", "g")
	case 7: // soft spreading: PodTopologySpread scores every cycle
		p = p.Label("app", "f").
			SpreadConstraint(1, "kubernetes.io/hostname", v1.ScheduleAnyway, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).
			SpreadConstraint(2, "topology.kubernetes.io/zone", v1.ScheduleAnyway, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil)
	case 8: // preferred (anti-)affinity: InterPodAffinity scores every cycle
		p = p.Label("app", "g").PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithPreferredReq).
			PodAffinityExists("app", "topology.kubernetes.io/zone", st.PodAffinityWithPreferredReq)
	case 9: // required affinity to app=g in a zone (the first such pod matches itself)
		p = p.Label("app", "g").PodAffinityExists("app", "topology.kubernetes.io/zone", st.PodAffinityWithRequiredReq)
	case 10: // required anti-affinity across zones and hostnames
		p = p.Label("app", "h").PodAntiAffinityExists("app", "topology.kubernetes.io/zone", st.PodAntiAffinityWithRequiredReq).
			PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithRequiredReq)
	}
	return p.Obj()
}

func sameDecisions(t *testing.T, seed uint64, parallelism int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 1))
	with, without := newHarness(t, ctx, true, parallelism), newHarness(t, ctx, false, parallelism)
	both := func(f func(h *harness)) { f(with); f(without) }
	nodeCount := 20 + rng.IntN(200) // over 100, a cycle stops before the end (rotation)
	nodes := map[string]*v1.Node{}
	next := 0
	addNode := func() {
		n := randomNode(rng, next)
		next++
		nodes[n.Name] = n
		both(func(h *harness) { h.kc.setNode(n) })
	}
	for range nodeCount {
		addNode()
	}
	var placed, nominated []*v1.Pod
	kind := 0
	for i := range 300 {
		// Cluster changes between pods, now and then.
		switch rng.IntN(30) {
		case 0:
			addNode()
		case 1: // a node changes (labels, taints, capacity)
			for name := range nodes {
				n := randomNode(rng, 0)
				n.Name, n.Labels["kubernetes.io/hostname"] = name, name
				n.Labels["topology.kubernetes.io/zone"] = nodes[name].Labels["topology.kubernetes.io/zone"]
				nodes[name] = n
				both(func(h *harness) { h.kc.setNode(n) })
				break
			}
		case 2:
			for name := range nodes {
				delete(nodes, name)
				both(func(h *harness) { h.kc.removeNode(name) })
				break
			}
		case 3: // a pod goes
			if len(placed) > 0 {
				k := rng.IntN(len(placed))
				p := placed[k]
				placed = append(placed[:k], placed[k+1:]...)
				both(func(h *harness) { h.kc.removePod(p) })
			}
		case 4: // the informer reports an assumed pod bound, as assumed or changed since
			if len(placed) > 0 {
				k := rng.IntN(len(placed))
				p := placed[k].DeepCopy()
				p.ResourceVersion = fmt.Sprint(i)
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
				if rng.IntN(2) == 0 {
					p.Labels = map[string]string{"app": "g"}
				}
				placed[k] = p
				both(func(h *harness) { h.kc.addPod(p) })
			}
		case 5: // an existing pod with required or preferred anti-affinity to app=g
			for name := range nodes {
				w := plainPod(fmt.Sprint("x", i), "100m")
				if rng.IntN(2) == 0 {
					w = w.PodAntiAffinityExists("app", "topology.kubernetes.io/zone", st.PodAntiAffinityWithRequiredReq)
				} else {
					w = w.PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithPreferredReq)
				}
				p := bound(w.Obj(), name)
				placed = append(placed, p)
				both(func(h *harness) { h.kc.addPod(p) })
				break
			}
		case 6, 7, 8: // a nomination (of a pod as big as most nodes' room) comes or goes
			if len(nominated) > 0 && rng.IntN(2) == 0 {
				nom := nominated[0]
				nominated = nominated[1:]
				both(func(h *harness) { h.q.DeleteNominatedPodIfExists(nom) })
				break
			}
			for name := range nodes {
				nom := plainPod(fmt.Sprint("nom", i), []string{"1", "2", "3"}[rng.IntN(3)]).Obj()
				nominated = append(nominated, nom)
				both(func(h *harness) {
					h.q.AddNominatedPod(logger, podInfo(nom), &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: name})
				})
				break
			}
		}
		if rng.IntN(4) == 0 { // runs of the same kind: consecutive pods of one signature
			kind = rng.IntN(numKinds)
		}
		pod := randomPod(rng, fmt.Sprint("p", i), kind)
		r1, s1 := with.cycle(ctx, pod)
		r2, s2 := without.cycle(ctx, pod)
		if r1.host != r2.host || s1.Code() != s2.Code() || s1.Message() != s2.Message() || with.r.nextStart != without.r.nextStart {
			t.Fatalf("pod %d (kind %d): with the cache %q %v (next %d), without %q %v (next %d)",
				i, kind, r1.host, s1, with.r.nextStart, r2.host, s2, without.r.nextStart)
		}
		if r1.host != "" {
			p := bound(pod.DeepCopy(), r1.host)
			placed = append(placed, p)
			both(func(h *harness) {
				if err := h.kc.assume(p); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	c := with.counts()
	ipa := with.r.equiv.plugins["default-scheduler"].affinity
	t.Logf("%d nodes at first; filter hits %d misses %d, score hits %d misses %d; InterPodAffinity PreFilter reused %d, fresh %d",
		nodeCount, c.fh, c.fm, c.sh, c.sm, ipa.reused, ipa.fresh)
	if c.fh == 0 || c.sh == 0 {
		t.Errorf("the cache was never used")
	}
}

// cpuTime is the process's user and system CPU time so far (the machine may be shared: wall
// time per operation says little).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIncrementalAffinity: consecutive pods with required anti-affinity of one signature
// reuse InterPodAffinity's PreFilter state, brought up to date with the nodes that changed
// (each pod assumed on its node repels the next ones); the decisions are those of a fresh
// PreFilter (a loop without the cache, beside it); another signature, a namespace
// selector or a changed node count start afresh.
func TestIncrementalAffinity(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	with, without := newHarness(t, ctx, true, 1), newHarness(t, ctx, false, 1)
	both := func(f func(h *harness)) { f(with); f(without) }
	for i := range 12 {
		n := zoneNode(fmt.Sprintf("n-%d", i), zones[i%3], "4")
		both(func(h *harness) { h.kc.setNode(n) })
	}
	ipa := with.r.equiv.plugins["default-scheduler"].affinity
	place := func(what string, pod *v1.Pod, wantReused, wantFresh int64) string {
		t.Helper()
		reused, fresh := ipa.reused, ipa.fresh
		r1, s1 := with.cycle(ctx, pod)
		r2, s2 := without.cycle(ctx, pod)
		if r1.host != r2.host || s1.Code() != s2.Code() || s1.Message() != s2.Message() {
			t.Fatalf("%s: with the cache %q %v, without %q %v", what, r1.host, s1, r2.host, s2)
		}
		if got := [2]int64{ipa.reused - reused, ipa.fresh - fresh}; got != [2]int64{wantReused, wantFresh} {
			t.Errorf("%s: PreFilter reused/fresh %v, want [%d %d]", what, got, wantReused, wantFresh)
		}
		if r1.host != "" {
			p := bound(pod.DeepCopy(), r1.host)
			both(func(h *harness) {
				if err := h.kc.assume(p); err != nil {
					t.Fatal(err)
				}
			})
		}
		return r1.host
	}
	anti := func(name, key string) *v1.Pod {
		return plainPod(name, "100m").Label("app", "g").PodAntiAffinityExists("app", key, st.PodAntiAffinityWithRequiredReq).Obj()
	}
	place("first", anti("a0", "kubernetes.io/hostname"), 0, 1)
	for i := 1; i < 12; i++ {
		place(fmt.Sprint("anti-affinity pod ", i), anti(fmt.Sprint("a", i), "kubernetes.io/hostname"), 1, 0)
	}
	if host := place("every node holds one", anti("a12", "kubernetes.io/hostname"), 1, 0); host != "" {
		t.Fatalf("a 13th pod placed on %s", host)
	}
	place("another signature", anti("z0", "topology.kubernetes.io/zone"), 0, 1)
	both(func(h *harness) { h.kc.removePod(bound(anti("a3", "kubernetes.io/hostname"), "")) })
	p := plainPod("x0", "100m").Label("app", "g").Obj()
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "g"}},
		NamespaceSelector: &metav1.LabelSelector{}}}}}
	place("a namespace selector", p, 0, 0)
	place("anti-affinity again after a pod went", anti("a13", "kubernetes.io/hostname"), 0, 1)
	place("and again", anti("a14", "kubernetes.io/hostname"), 1, 0)
	n := zoneNode("n-12", "a", "4")
	both(func(h *harness) { h.kc.setNode(n) })
	place("a node added", anti("a15", "kubernetes.io/hostname"), 0, 1)
}
