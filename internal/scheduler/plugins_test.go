package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/clock"
)

// decision is what the plugins decided for one node: the filter verdict and, for feasible
// nodes, the weighted total score.
type decision struct {
	code    fwk.Code
	reasons string
	score   int64
}

// newFramework is the default profile over lister (upstream's defaulting, plugins and
// runtime).
func newFramework(t *testing.T, ctx context.Context, lister fwk.SharedLister, nominator fwk.PodNominator, opts ...frameworkruntime.Option) framework.Framework {
	t.Helper()
	f, _ := newFrameworkPlugins(t, ctx, lister, nominator, opts...)
	return f
}

// newFrameworkPlugins is newFramework with the plugin instances (newProfile).
func newFrameworkPlugins(t *testing.T, ctx context.Context, lister fwk.SharedLister, nominator fwk.PodNominator, opts ...frameworkruntime.Option) (framework.Framework, *profilePlugins) {
	t.Helper()
	conf, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	// DynamicResources needs a DRA manager over live informers (Start builds one); no case
	// here has resource claims.
	prof := conf.Profiles[0]
	plugins := *prof.Plugins
	plugins.MultiPoint.Enabled = slices.DeleteFunc(slices.Clone(plugins.MultiPoint.Enabled), func(p config.Plugin) bool { return p.Name == names.DynamicResources })
	prof.Plugins = &plugins
	cs := fake.NewClientset()
	opts = append([]frameworkruntime.Option{
		frameworkruntime.WithClientSet(cs), frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(cs, 0)),
		frameworkruntime.WithSnapshotSharedLister(lister), frameworkruntime.WithPodNominator(nominator),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap())}, opts...)
	f, pp, err := newProfile(ctx, &prof, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if pp == nil {
		t.Fatal("the profile's plugin instances were not all seen built")
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, pp
}

// decide runs PreFilter, Filter on every node, then PreScore and Score on the feasible
// ones: the plugins' raw decisions, without any shell.
func decide(t *testing.T, ctx context.Context, f framework.Framework, nodes []fwk.NodeInfo, pod *v1.Pod) map[string]decision {
	t.Helper()
	state := framework.NewCycleState()
	out := map[string]decision{}
	if _, s, _ := f.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		for _, n := range nodes {
			out[n.Node().Name] = decision{code: s.Code(), reasons: reasonsOf(s)}
		}
		return out
	}
	var feasible []fwk.NodeInfo
	for _, n := range nodes {
		s := f.RunFilterPluginsWithNominatedPods(ctx, state, pod, n)
		out[n.Node().Name] = decision{code: s.Code(), reasons: reasonsOf(s)}
		if s.IsSuccess() {
			feasible = append(feasible, n)
		}
	}
	if len(feasible) == 0 {
		return out
	}
	if s := f.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
		t.Fatalf("prescore: %v", s)
	}
	scores, s := f.RunScorePlugins(ctx, state, pod, feasible)
	if !s.IsSuccess() {
		t.Fatalf("score: %v", s)
	}
	for _, sc := range scores {
		d := out[sc.Name]
		d.score = sc.TotalScore
		out[sc.Name] = d
	}
	return out
}

func zoneNode(name, zone, cpu string) *v1.Node {
	return st.MakeNode().Name(name).Label("kubernetes.io/hostname", name).Label("topology.kubernetes.io/zone", zone).
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "16Gi", v1.ResourcePods: "110"}).Obj()
}

func bound(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeName = node
	return p
}

// TestPluginsThroughShell: every case runs upstream's plugins twice — over upstream's own
// snapshot built from scratch (internalcache.NewSnapshot) and over Kube's cache and
// incrementally updated snapshot, fed as the informers and the scheduling loop feed it
// (bound pods added, assumed pods assumed, nodes changed after a first snapshot) — and
// requires the same verdict and score on every node, and Kube's cycle to pick a node with
// the best score.
func TestPluginsThroughShell(t *testing.T) {
	nodes := []*v1.Node{zoneNode("a1", "a", "4"), zoneNode("a2", "a", "4"), zoneNode("b1", "b", "4"), zoneNode("b2", "b", "8"), zoneNode("c1", "c", "2")}
	tainted := zoneNode("t1", "c", "4")
	tainted.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}, {Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}}
	nodes = append(nodes, tainted)
	nodes[0].Status.Images = []v1.ContainerImage{{Names: []string{"big:1"}, SizeBytes: 800 * 1024 * 1024}}
	nodes[2].Status.Images = []v1.ContainerImage{{Names: []string{"big:1"}, SizeBytes: 800 * 1024 * 1024}}

	req := func(name, cpu string) *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "1Gi"})
	}
	cases := []struct {
		name     string
		existing []*v1.Pod // bound, seen by the informer
		assumed  []*v1.Pod // chosen by earlier cycles, binding in flight
		pod      *v1.Pod
	}{
		{name: "resources count assumed pods", pod: req("p", "3").Obj(),
			existing: []*v1.Pod{bound(req("e1", "2").Obj(), "a1")},
			assumed:  []*v1.Pod{bound(req("s1", "3").Obj(), "b2"), bound(req("s2", "2").Obj(), "a2")}},
		{name: "init containers and overhead", pod: func() *v1.Pod {
			p := req("p", "1").InitReq(map[v1.ResourceName]string{v1.ResourceCPU: "3500m"}).Obj()
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resourceQ("250m")}
			return p
		}(), existing: []*v1.Pod{bound(req("e1", "1").Obj(), "b1")}},
		{name: "inter-pod anti-affinity of existing pods", pod: req("p", "100m").Label("app", "web").Obj(),
			existing: []*v1.Pod{bound(req("e1", "100m").Label("app", "db").PodAntiAffinityExists("app", "topology.kubernetes.io/zone", st.PodAntiAffinityWithRequiredReq).Obj(), "a1")},
			assumed:  []*v1.Pod{bound(req("s1", "100m").Label("app", "cache").PodAntiAffinityExists("app", "kubernetes.io/hostname", st.PodAntiAffinityWithRequiredReq).Obj(), "b1")}},
		{name: "required and preferred pod affinity", pod: req("p", "100m").PodAffinityExists("tier", "topology.kubernetes.io/zone", st.PodAffinityWithRequiredReq).
			PodAffinityIn("role", "kubernetes.io/hostname", []string{"lead"}, st.PodAffinityWithPreferredReq).Obj(),
			existing: []*v1.Pod{bound(req("e1", "100m").Label("tier", "x").Obj(), "b1"), bound(req("e2", "100m").Label("role", "lead").Obj(), "b2")}},
		{name: "topology spread across zones", pod: req("p", "100m").Label("app", "s").
			SpreadConstraint(1, "topology.kubernetes.io/zone", v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).Obj(),
			existing: []*v1.Pod{bound(req("e1", "100m").Label("app", "s").Obj(), "a1"), bound(req("e2", "100m").Label("app", "s").Obj(), "b1")},
			assumed:  []*v1.Pod{bound(req("s1", "100m").Label("app", "s").Obj(), "a2")}},
		{name: "taints, tolerations and preferences", pod: req("p", "100m").Toleration("k").Obj()},
		{name: "node affinity", pod: req("p", "100m").NodeAffinityIn("topology.kubernetes.io/zone", []string{"a", "b"}, st.NodeSelectorTypeMatchExpressions).Obj()},
		{name: "host ports", pod: req("p", "100m").HostPort(80).Obj(),
			existing: []*v1.Pod{bound(req("e1", "100m").HostPort(80).Obj(), "a1")}, assumed: []*v1.Pod{bound(req("s1", "100m").HostPort(80).Obj(), "b2")}},
		{name: "image locality", pod: req("p", "100m").Container("big:1").Obj()},
		{name: "nothing fits", pod: req("p", "9").Obj()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			all := append(append([]*v1.Pod{}, c.existing...), c.assumed...)
			ref := internalcache.NewSnapshot(all, nodes)
			refNodes, _ := ref.NodeInfos().List()
			want := decide(t, ctx, newFramework(t, ctx, ref, noNominations{}), refNodes, c.pod)

			// Kube: nodes arrive, a first snapshot is taken, then pods (bound and assumed)
			// and a node change arrive and the snapshot is brought up to date.
			kc, snap := newNodeCache(), newSnapshot()
			for _, n := range nodes {
				kc.setNode(n)
			}
			kc.updateSnapshot(snap)
			for _, p := range c.existing {
				kc.addPod(p)
			}
			for _, p := range c.assumed {
				if err := kc.assume(p); err != nil {
					t.Fatal(err)
				}
			}
			kc.setNode(nodes[len(nodes)-1].DeepCopy())
			kc.updateSnapshot(snap)
			q := newQueue(func(a, b fwk.QueuedEntityInfo) bool { return false }, nil, clock.RealClock{}, nil)
			f := newFramework(t, ctx, snap, q)
			got := decide(t, ctx, f, snap.list, c.pod)
			for name, w := range want {
				if g := got[name]; g != w {
					t.Errorf("node %s: Kube's path %+v, upstream's snapshot %+v", name, g, w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("Kube's snapshot has %d nodes, upstream's %d", len(got), len(want))
			}

			// The cycle picks one of the best-scored feasible nodes, or fails with
			// upstream's FitError.
			r := &run{log: discardLog(), profiles: map[string]framework.Framework{"default-scheduler": f}, cache: kc, snap: snap, queue: q}
			qp := &framework.QueuedPodInfo{PodInfo: podInfo(c.pod)}
			res, status := r.algorithm(ctx, f, framework.NewCycleState(), qp)
			best := int64(-1)
			for _, w := range want {
				if w.code == fwk.Success {
					best = max(best, w.score)
				}
			}
			if best < 0 {
				if status.IsSuccess() || !status.IsRejected() {
					t.Fatalf("nothing fits, yet the cycle says %v (host %q)", status, res.host)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("cycle: %v", status)
			}
			if w := want[res.host]; w.code != fwk.Success || w.score != best {
				t.Errorf("cycle chose %s (%+v), best score %d", res.host, w, best)
			}
		})
	}
}

// TestCacheForgetAndRebind: an assumed pod taken back frees its node; the informer's bound
// copy replaces the assumed one (counted once), or leaves the node's NodeInfo as it is when
// it differs only in what the binding wrote.
func TestCacheForgetAndRebind(t *testing.T) {
	kc, snap := newNodeCache(), newSnapshot()
	kc.setNode(zoneNode("n", "a", "4"))
	p := bound(st.MakePod().Namespace("ns").Name("p").UID("p").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj(), "n")
	if err := kc.assume(p); err != nil {
		t.Fatal(err)
	}
	if err := kc.assume(p); err == nil {
		t.Error("assuming twice succeeded")
	}
	kc.updateSnapshot(snap)
	if got := snap.infos["n"].Requested.MilliCPU; got != 1000 {
		t.Fatalf("requested %d after assume", got)
	}
	kc.addPod(p) // the informer sees the binding
	kc.addPod(p)
	kc.updateSnapshot(snap)
	if got := snap.infos["n"].Requested.MilliCPU; got != 1000 || kc.isAssumed(types.UID("p")) {
		t.Fatalf("requested %d after bind, assumed %v", got, kc.isAssumed("p"))
	}
	done := p.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	kc.addPod(done)
	kc.updateSnapshot(snap)
	if got := snap.infos["n"].Requested.MilliCPU; got != 0 {
		t.Fatalf("requested %d after the pod ended", got)
	}
	q := bound(st.MakePod().Namespace("ns").Name("q").UID("q").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj(), "n")
	_ = kc.assume(q)
	kc.updateSnapshot(snap)
	assumedInfo, gen := snap.infos["n"], snap.infos["n"].Generation
	// The binding as the informer reports it: another resourceVersion, PodScheduled=True.
	q2 := q.DeepCopy()
	q2.ResourceVersion = "7"
	q2.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
	kc.addPod(q2)
	kc.updateSnapshot(snap)
	if snap.infos["n"] != assumedInfo || snap.infos["n"].Generation != gen || kc.isAssumed("q") {
		t.Fatalf("an unchanged binding changed the node (generation %d → %d) or left the pod assumed (%v)", gen, snap.infos["n"].Generation, kc.isAssumed("q"))
	}
	q3 := q2.DeepCopy()
	q3.Labels = map[string]string{"app": "x"} // a change after the binding
	kc.addPod(q3)
	kc.updateSnapshot(snap)
	if got := snap.infos["n"]; got.Generation == gen || len(got.Pods) != 1 || got.Pods[0].GetPod().Labels["app"] != "x" {
		t.Fatalf("a changed pod did not replace its copy on the node: %d pods, generation %d", len(got.Pods), got.Generation)
	}
	r := bound(st.MakePod().Namespace("ns").Name("r").UID("r").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj(), "n")
	_ = kc.assume(r)
	r2 := r.DeepCopy()
	r2.Labels = map[string]string{"app": "y"} // changed while the binding was in flight
	kc.addPod(r2)
	kc.updateSnapshot(snap)
	if got := snap.infos["n"]; len(got.Pods) != 2 || got.Pods[1].GetPod().Labels["app"] != "y" || got.Requested.MilliCPU != 3000 {
		t.Fatalf("a bound pod unlike its assumed copy was not taken: %d pods, %d mCPU", len(got.Pods), got.Requested.MilliCPU)
	}
	kc.removePod(q3)
	kc.removePod(r2)
	_ = kc.assume(q)
	kc.forget(q)
	kc.removeNode("n")
	kc.updateSnapshot(snap)
	if len(snap.list) != 0 || len(snap.infos) != 0 {
		t.Fatalf("snapshot after the node went: %d nodes", len(snap.list))
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	p := func(v int32) *int32 { return &v }
	for _, c := range []struct {
		profile, global *int32
		nodes, want     int32
	}{
		{nil, nil, 50, 50}, {nil, nil, 100, 100}, {nil, p(0), 1000, 420}, {nil, p(0), 5000, 500}, {nil, p(0), 6000, 300},
		{p(30), p(0), 1000, 300}, {nil, p(1), 1000, 100}, {nil, p(100), 5000, 5000},
	} {
		if got := numFeasibleNodesToFind(c.profile, c.global, c.nodes); got != c.want {
			t.Errorf("%d nodes: %d, want %d", c.nodes, got, c.want)
		}
	}
}

func TestNodeTreeOrder(t *testing.T) {
	tr := newNodeTree()
	for _, n := range []*v1.Node{zoneNode("a1", "a", "1"), zoneNode("a2", "a", "1"), zoneNode("b1", "b", "1"), zoneNode("a3", "a", "1"), zoneNode("c1", "c", "1")} {
		tr.set(n)
	}
	if got := fmt.Sprint(tr.list()); got != "[a1 b1 c1 a2 a3]" {
		t.Errorf("order %s", got)
	}
	moved := zoneNode("a2", "c", "1")
	tr.set(moved)
	tr.remove("b1")
	if got := fmt.Sprint(tr.list()); got != "[a1 c1 a3 a2]" {
		t.Errorf("order after moves %s", got)
	}
}

type noNominations struct{}

func (noNominations) AddNominatedPod(_ klogLogger, _ fwk.PodInfo, _ *fwk.NominatingInfo) {}
func (noNominations) DeleteNominatedPodIfExists(*v1.Pod)                                 {}
func (noNominations) UpdateNominatedPod(klogLogger, *v1.Pod, fwk.PodInfo)                {}
func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo                          { return nil }
