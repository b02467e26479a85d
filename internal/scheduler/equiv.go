package scheduler

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// equivCache lets consecutive pods of the same scheduling signature share the plugins'
// per-node work: each node's Filter verdict and raw Score per plugin, computed for an
// earlier pod, are reused while that node's snapshot NodeInfo is the very same object
// (same pointer, same generation) and nothing cluster-wide that the plugins read changed.
// The feasible set and the chosen node are the same as without it: the nodes are visited
// in the same order from the same start, only the plugin calls whose answer is known are
// not made again; NormalizeScore and the weights run over the feasible nodes as always.
//
// Which pods and which plugins:
//
//   - The signature (podSignature) is the pod's namespace, labels and spec, with the volumes
//     and volume mounts left out; a pod is not signed (never cached) when it has inter-pod
//     affinity or anti-affinity, topology spread constraints, resource claims, a nominated
//     node, container statuses or a condition other than PodScheduled (in-place resize),
//     requests of anything but cpu, memory and ephemeral-storage (extended resources may be
//     backed by DRA, cluster-wide state), or a volume other than configMap, secret,
//     projected, downwardAPI or emptyDir.
//   - Every Filter and Score plugin that the pod's PreFilter and PreScore did not skip must
//     be one that reads only the pod and the node's NodeInfo (cacheable below). So
//     InterPodAffinity (existing pods' anti-affinity or preferred terms reaching this pod),
//     PodTopologySpread (explicit or system default constraints that apply), the volume
//     plugins and DynamicResources turn the cache off for that pod simply by running; the
//     skipped sets are part of the key, as is the profile.
//   - Cluster-wide state those plugins read: the number of nodes (ImageLocality's spread);
//     any change of the node list (a node added, removed or moved to another zone) starts
//     afresh. Nominated pods are per node: a node with any nominated pod is filtered
//     without the cache (upstream's RunFilterPluginsWithNominatedPods) and not stored.
//
// The entries are indexed by the node's position in the snapshot's list; the scheduling
// loop alone uses the cache, and the parallel workers of one cycle touch distinct entries.
type equivCache struct {
	profile  string
	sig      []byte
	skipF    sets.Set[string]
	skipS    sets.Set[string]
	listVer  uint64
	fEpoch   uint64 // entries with another filter epoch hold nothing
	sEpoch   uint64 // entries with another score epoch hold no scores
	entries  []equivEntry
	plugins  map[string]*profilePlugins // by profile name
	disabled bool
	// scoreBuf is score's result, reused: the cycle only picks the best node from it.
	scoreBuf []fwk.NodePluginScores

	// Counters for tests and logs.
	filterHits, filterMisses, scoreHits, scoreMisses atomic.Int64
}

type equivEntry struct {
	fEpoch, sEpoch uint64
	ni             fwk.NodeInfo
	gen            int64
	name           string      // ni's node's name (read once: 5,000 NodeInfos are 5,000 cache misses)
	status         *fwk.Status // the Filter verdict; nil is feasible
	raw            []fwk.PluginScore
}

// profilePlugins are a profile's Filter and Score plugins.
type profilePlugins struct {
	filter, score []string
}

// cacheableFilter and cacheableScore are the plugins whose Filter or Score reads only the
// pod, the node's NodeInfo, the plugin's own arguments and the number of nodes.
var (
	cacheableFilter = sets.New(names.NodeUnschedulable, names.NodeName, names.TaintToleration, names.NodeAffinity,
		names.NodePorts, names.NodeResourcesFit)
	cacheableScore = sets.New(names.TaintToleration, names.NodeAffinity, names.NodeResourcesFit,
		names.NodeResourcesBalancedAllocation, names.ImageLocality)
	// VolumeBinding's PreScore does not skip when storage capacity scoring is on, and
	// DynamicResources has no PreScore; but after their PreFilter skipped (the pod has no
	// volume claims, no resource claims) their Score reads only the empty state that
	// PreFilter wrote: 0 on every node.
	cacheableScoreIfFilterSkipped = sets.New(names.VolumeBinding, names.DynamicResources)
)

func newEquivCache() *equivCache {
	return &equivCache{plugins: map[string]*profilePlugins{}}
}

func (c *equivCache) pluginsOf(f framework.Framework) *profilePlugins {
	p, ok := c.plugins[f.ProfileName()]
	if !ok {
		p = &profilePlugins{}
		if l := f.ListPlugins(); l != nil {
			for _, e := range l.Filter.Enabled {
				p.filter = append(p.filter, e.Name)
			}
			for _, e := range l.Score.Enabled {
				p.score = append(p.score, e.Name)
			}
		}
		c.plugins[f.ProfileName()] = p
	}
	return p
}

// allCacheable: every plugin of list that state does not skip is in ok.
func allCacheable(list []string, skipped sets.Set[string], ok sets.Set[string]) bool {
	for _, name := range list {
		if !ok.Has(name) && !skipped.Has(name) {
			return false
		}
	}
	return true
}

// beginFilter decides, after PreFilter, whether this cycle's filtering may use the cache
// (sig is the pod's signature, nil when it has none; n the snapshot's node count) and
// starts a new filter epoch when the key changed.
func (c *equivCache) beginFilter(f framework.Framework, state fwk.CycleState, sig []byte, listVer uint64, n int) bool {
	if c == nil || c.disabled || sig == nil {
		return false
	}
	skipF := state.GetSkipFilterPlugins()
	if !allCacheable(c.pluginsOf(f).filter, skipF, cacheableFilter) {
		return false
	}
	if c.profile != f.ProfileName() || !bytes.Equal(c.sig, sig) || !skipF.Equal(c.skipF) || c.listVer != listVer || len(c.entries) != n {
		c.profile, c.sig, c.skipF, c.listVer = f.ProfileName(), sig, skipF.Clone(), listVer
		c.fEpoch++
		c.sEpoch++
		c.skipS = nil
		if len(c.entries) != n {
			c.entries = make([]equivEntry, n)
		}
	}
	return true
}

// beginScore decides, after PreScore, whether scoring may use the cache; only after a
// beginFilter of the same cycle that said yes.
func (c *equivCache) beginScore(f framework.Framework, state fwk.CycleState) bool {
	skipS := state.GetSkipScorePlugins()
	for _, name := range c.pluginsOf(f).score {
		if !cacheableScore.Has(name) && !skipS.Has(name) && !(cacheableScoreIfFilterSkipped.Has(name) && c.skipF.Has(name)) {
			return false
		}
	}
	if c.skipS == nil || !skipS.Equal(c.skipS) {
		c.skipS = skipS.Clone()
		c.sEpoch++
	}
	return true
}

// nominations tells whether any pod is nominated to a node.
type nominations interface {
	hasNominated(node string) bool
}

// filter is the Filter verdict of ni, at position pos of the snapshot's list: the stored
// one when valid, else the plugins' (stored).
func (c *equivCache) filter(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, pos int, ni fwk.NodeInfo, nom nominations) *fwk.Status {
	e := &c.entries[pos]
	valid := e.fEpoch == c.fEpoch && e.ni == ni && e.gen == ni.GetGeneration()
	name := e.name
	if !valid {
		name = ni.Node().Name
	}
	if nom.hasNominated(name) {
		return f.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
	}
	if valid {
		c.filterHits.Add(1)
		return e.status
	}
	c.filterMisses.Add(1)
	// Without nominated pods on the node, RunFilterPluginsWithNominatedPods is one
	// RunFilterPlugins.
	s := f.RunFilterPlugins(ctx, state, pod, ni)
	if s.Code() == fwk.Error {
		*e = equivEntry{}
		return s
	}
	*e = equivEntry{fEpoch: c.fEpoch, ni: ni, gen: ni.GetGeneration(), name: name, status: s}
	return s
}

// score runs Score on the feasible nodes (positions pos in the snapshot's list) whose raw
// scores are not stored, then upstream's NormalizeScores (NormalizeScore per plugin over
// all of them, weights). The result is valid until the next call.
func (c *equivCache) score(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, feasible []fwk.NodeInfo, pos []int) ([]fwk.NodePluginScores, *fwk.Status) {
	if cap(c.scoreBuf) < len(feasible) {
		c.scoreBuf = make([]fwk.NodePluginScores, len(feasible))
	}
	scores := c.scoreBuf[:len(feasible)]
	clear(scores)
	var misses []int
	for i, ni := range feasible {
		e := &c.entries[pos[i]]
		if e.sEpoch == c.sEpoch && e.fEpoch == c.fEpoch && e.ni == ni && e.gen == ni.GetGeneration() {
			scores[i].Name, scores[i].RawScores = e.name, e.raw
			continue
		}
		scores[i].Name = ni.Node().Name
		misses = append(misses, i)
	}
	c.scoreHits.Add(int64(len(feasible) - len(misses)))
	c.scoreMisses.Add(int64(len(misses)))
	if len(misses) > 0 {
		var firstErr atomic.Pointer[fwk.Status]
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		f.Parallelizer().Until(sctx, len(misses), func(k int) {
			i := misses[k]
			ni := feasible[i]
			raw, s := f.RunRawScorePlugins(sctx, state, pod, ni)
			if !s.IsSuccess() {
				firstErr.CompareAndSwap(nil, s)
				cancel()
				return
			}
			scores[i].RawScores = raw
			e := &c.entries[pos[i]]
			// The filter verdict stored for this very NodeInfo in this epoch (the node was
			// just found feasible with it) gets the raw scores beside it.
			if e.fEpoch == c.fEpoch && e.ni == ni && e.gen == ni.GetGeneration() {
				e.raw, e.sEpoch = raw, c.sEpoch
			}
		}, "Score")
		if s := firstErr.Load(); s != nil {
			return nil, fwk.AsStatus(s.AsError())
		}
	}
	if s := f.NormalizeScores(ctx, state, pod, scores); !s.IsSuccess() {
		return nil, s
	}
	return scores, nil
}

// plainResources: only cpu, memory and ephemeral-storage.
func plainResources(l v1.ResourceList) bool {
	for name := range l {
		if name != v1.ResourceCPU && name != v1.ResourceMemory && name != v1.ResourceEphemeralStorage {
			return false
		}
	}
	return true
}

func plainRequirements(r *v1.ResourceRequirements) bool {
	return plainResources(r.Requests) && plainResources(r.Limits) && len(r.Claims) == 0
}

// podSignature is what the cacheable plugins can read of a pod (a superset: the namespace,
// labels and the whole spec but its volumes and volume mounts), or nil for a pod the cache
// is not for (see equivCache).
func podSignature(pod *v1.Pod) []byte {
	st := &pod.Status
	if st.NominatedNodeName != "" || len(st.ContainerStatuses) > 0 || len(st.InitContainerStatuses) > 0 ||
		len(st.EphemeralContainerStatuses) > 0 || st.Resize != "" {
		return nil
	}
	for _, c := range st.Conditions {
		if c.Type != v1.PodScheduled {
			return nil
		}
	}
	spec := pod.Spec // a shallow copy; slices replaced below, never written through
	if a := spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return nil
	}
	if len(spec.TopologySpreadConstraints) > 0 || len(spec.ResourceClaims) > 0 || len(spec.EphemeralContainers) > 0 ||
		spec.NodeName != "" || len(spec.SchedulingGates) > 0 || !plainResources(spec.Overhead) ||
		(spec.Resources != nil && !plainRequirements(spec.Resources)) {
		return nil
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i].VolumeSource
		if v.Secret == nil && v.ConfigMap == nil && v.Projected == nil && v.DownwardAPI == nil && v.EmptyDir == nil {
			return nil
		}
	}
	spec.Volumes = nil
	scrub := func(cs []v1.Container) ([]v1.Container, bool) {
		if len(cs) == 0 {
			return cs, true
		}
		out := make([]v1.Container, len(cs))
		for i := range cs {
			if !plainRequirements(&cs[i].Resources) {
				return nil, false
			}
			out[i] = cs[i]
			out[i].VolumeMounts, out[i].VolumeDevices = nil, nil
		}
		return out, true
	}
	var ok bool
	if spec.Containers, ok = scrub(spec.Containers); !ok {
		return nil
	}
	if spec.InitContainers, ok = scrub(spec.InitContainers); !ok {
		return nil
	}
	meta := metav1.ObjectMeta{Namespace: pod.Namespace, Labels: pod.Labels}
	m, err := meta.Marshal()
	if err != nil {
		return nil
	}
	s, err := spec.Marshal()
	if err != nil {
		return nil
	}
	out := binary.AppendUvarint(make([]byte, 0, len(m)+len(s)+binary.MaxVarintLen64), uint64(len(m)))
	return append(append(out, m...), s...)
}
