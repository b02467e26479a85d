package scheduler

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// equivCache lets consecutive pods of the same scheduling signature share the plugins'
// per-node work: each node's verdict of the cacheable Filter plugins and raw score of the
// cacheable Score plugins, computed for an earlier pod, are reused while that node's
// snapshot NodeInfo is the very same object (same pointer, same generation) and nothing
// cluster-wide that those plugins read changed. The other plugins (PodTopologySpread,
// InterPodAffinity, the volume plugins, ...) run on every node every cycle, as without the
// cache. The feasible set and the chosen node are the same as without it: the nodes are
// visited in the same order from the same start, a node's verdict is the first failing
// plugin's in the profile's order, and NormalizeScore and the weights run over the
// feasible nodes as always (score: Kube's own loop over the profile's Score plugins,
// without upstream's per-node allocations).
//
// Which pods and which plugins:
//
//   - The signature (podSignature) is the pod's namespace, labels and spec, with the volumes
//     and volume mounts left out; a pod is not signed (never cached) when it has resource
//     claims, a nominated node, container statuses or a condition other than PodScheduled
//     (in-place resize), requests of anything but cpu, memory and ephemeral-storage
//     (extended resources may be backed by DRA, cluster-wide state), or a volume other than
//     configMap, secret, projected, downwardAPI or emptyDir.
//   - Cacheable are the Filter and Score plugins that read only the pod, the node's NodeInfo
//     and the number of nodes (cacheableFilter, cacheableScore). The skipped sets that the
//     pod's PreFilter and PreScore left are part of the key, as is the profile.
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
	plugins  map[string]*profilePlugins // by profile name (register)
	disabled bool

	// This key's split of the profile's plugins (indexes into pp's lists, in order):
	// cacheable and fresh Filter plugins; the non-skipped Score plugins, each cacheable
	// (its raw score at slab[pos*len(cScore)+k]) or fresh (computed every cycle).
	pp               *profilePlugins
	cFilter, fFilter []int
	cScore, fScore   []int
	scoreSlots       []scoreSlot
	slab             []int64

	// Buffers reused from cycle to cycle.
	scoreBuf []fwk.NodePluginScores // score's result
	rows     [][]int64              // cacheable raw scores of feasible[i]
	scratch  []int64                // rows of nodes whose entry cannot hold them
	fresh    []int64                // fresh raw scores, len(fScore) per feasible node
	lists    []fwk.NodeScoreList    // one per scoreSlot
	misses   []int

	// Counters for tests and logs.
	filterHits, filterMisses, scoreHits, scoreMisses atomic.Int64
}

type scoreSlot struct {
	plugin    int  // index in pp.score
	cacheable bool // k indexes cScore, else fScore
	k         int
}

type equivEntry struct {
	fEpoch, sEpoch uint64
	ni             fwk.NodeInfo
	gen            int64
	name           string      // ni's node's name (read once: 5,000 NodeInfos are 5,000 cache misses)
	status         *fwk.Status // the cacheable Filter plugins' verdict; nil is feasible
	failedAt       int         // index in pp.filter of the plugin that gave status
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

// register makes the cache usable for a profile; pp nil leaves the profile uncached.
func (c *equivCache) register(profile string, pp *profilePlugins) {
	if c != nil && pp != nil {
		c.plugins[profile] = pp
	}
}

// beginPreFilter returns the pod's signature (nil: none, or the cache is off) and tells
// the profile's InterPodAffinity, whose PreFilter reuses its state between pods of one
// signature (affinity.go).
func (c *equivCache) beginPreFilter(f framework.Framework, pod *v1.Pod) []byte {
	if c == nil || c.disabled {
		return nil
	}
	pp := c.plugins[f.ProfileName()]
	if pp == nil {
		return nil
	}
	sig := podSignature(pod)
	pp.affinity.setPod(pod, sig)
	return sig
}

// beginFilter decides, after PreFilter, whether this cycle's filtering may use the cache
// (sig is the pod's signature, nil when it has none; n the snapshot's node count) and
// starts a new filter epoch when the key changed.
func (c *equivCache) beginFilter(f framework.Framework, state fwk.CycleState, sig []byte, listVer uint64, n int) bool {
	if c == nil || c.disabled || sig == nil {
		return false
	}
	pp := c.plugins[f.ProfileName()]
	if pp == nil {
		return false
	}
	skipF := state.GetSkipFilterPlugins()
	if c.pp != pp || c.profile != f.ProfileName() || !bytes.Equal(c.sig, sig) || !skipF.Equal(c.skipF) || c.listVer != listVer || len(c.entries) != n {
		c.profile, c.sig, c.skipF, c.listVer, c.pp = f.ProfileName(), sig, skipF.Clone(), listVer, pp
		c.fEpoch++
		c.sEpoch++
		c.skipS = nil
		if len(c.entries) != n {
			c.entries = make([]equivEntry, n)
		}
		c.cFilter, c.fFilter = c.cFilter[:0], c.fFilter[:0]
		for i, pl := range pp.filter {
			switch {
			case skipF.Has(pl.Name()):
			case cacheableFilter.Has(pl.Name()):
				c.cFilter = append(c.cFilter, i)
			default:
				c.fFilter = append(c.fFilter, i)
			}
		}
	}
	return true
}

// beginScore prepares, after PreScore, this cycle's split of the Score plugins; only after
// a beginFilter of the same cycle that said yes.
func (c *equivCache) beginScore(f framework.Framework, state fwk.CycleState) bool {
	skipS := state.GetSkipScorePlugins()
	if c.skipS != nil && skipS.Equal(c.skipS) {
		return true
	}
	c.skipS = skipS.Clone()
	c.sEpoch++
	c.cScore, c.fScore, c.scoreSlots = c.cScore[:0], c.fScore[:0], c.scoreSlots[:0]
	for i, pl := range c.pp.score {
		name := pl.Name()
		switch {
		case skipS.Has(name):
			continue
		case cacheableScore.Has(name) || (cacheableScoreIfFilterSkipped.Has(name) && c.skipF.Has(name)):
			c.scoreSlots = append(c.scoreSlots, scoreSlot{plugin: i, cacheable: true, k: len(c.cScore)})
			c.cScore = append(c.cScore, i)
		default:
			c.scoreSlots = append(c.scoreSlots, scoreSlot{plugin: i, k: len(c.fScore)})
			c.fScore = append(c.fScore, i)
		}
	}
	if need := len(c.entries) * len(c.cScore); cap(c.slab) < need {
		c.slab = make([]int64, need)
	}
	for len(c.lists) < len(c.scoreSlots) {
		c.lists = append(c.lists, nil)
	}
	return true
}

// nominations tells whether any pod is nominated to a node.
type nominations interface {
	hasNominated(node string) bool
}

// valid: e holds this key's filter verdict for ni.
func (c *equivCache) valid(e *equivEntry, ni fwk.NodeInfo) bool {
	return e.fEpoch == c.fEpoch && e.ni == ni && e.gen == ni.GetGeneration()
}

// filter is the Filter verdict of ni, at position pos of the snapshot's list: the
// cacheable plugins' stored verdict when valid (else theirs, stored), and the fresh
// plugins' — those before the cacheable one that failed, all of them when none did.
func (c *equivCache) filter(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, pos int, ni fwk.NodeInfo, nom nominations) *fwk.Status {
	e := &c.entries[pos]
	valid := c.valid(e, ni)
	name := e.name
	if !valid {
		name = ni.Node().Name
	}
	if nom.hasNominated(name) {
		return f.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
	}
	status, failedAt := e.status, e.failedAt
	if valid {
		c.filterHits.Add(1)
	} else {
		c.filterMisses.Add(1)
		status, failedAt = c.pp.runFilter(ctx, c.cFilter, state, pod, ni)
		if status.Code() == fwk.Error {
			*e = equivEntry{}
			return status
		}
		*e = equivEntry{fEpoch: c.fEpoch, ni: ni, gen: ni.GetGeneration(), name: name, status: status, failedAt: failedAt}
	}
	if len(c.fFilter) == 0 {
		return status
	}
	fresh := c.fFilter
	if status != nil {
		k := 0
		for k < len(fresh) && fresh[k] < failedAt {
			k++
		}
		fresh = fresh[:k]
	}
	if s, _ := c.pp.runFilter(ctx, fresh, state, pod, ni); s != nil {
		return s
	}
	return status
}

// score is RunScorePlugins over the feasible nodes (positions pos in the snapshot's list):
// the cacheable plugins' raw scores stored or computed (and stored), the fresh plugins'
// computed, then NormalizeScore per plugin and the weighted totals. The result (names and
// totals) is valid until the next call.
func (c *equivCache) score(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, feasible []fwk.NodeInfo, pos []int) ([]fwk.NodePluginScores, *fwk.Status) {
	n, nc, nf := len(feasible), len(c.cScore), len(c.fScore)
	if cap(c.scoreBuf) < n {
		c.scoreBuf = make([]fwk.NodePluginScores, n)
		c.rows = make([][]int64, n)
	}
	scores, rows := c.scoreBuf[:n], c.rows[:n]
	if need := n * nc; cap(c.scratch) < need {
		c.scratch = make([]int64, need)
	}
	if need := n * nf; cap(c.fresh) < need {
		c.fresh = make([]int64, need)
	}
	fresh := c.fresh[:n*nf]
	misses := c.misses[:0]
	for i, ni := range feasible {
		e := &c.entries[pos[i]]
		if c.valid(e, ni) {
			scores[i] = fwk.NodePluginScores{Name: e.name}
			rows[i] = c.slab[pos[i]*nc : (pos[i]+1)*nc]
			if e.sEpoch == c.sEpoch {
				continue
			}
		} else {
			scores[i] = fwk.NodePluginScores{Name: ni.Node().Name}
			rows[i] = c.scratch[i*nc : (i+1)*nc]
		}
		misses = append(misses, i)
	}
	c.misses = misses
	c.scoreHits.Add(int64(n - len(misses)))
	c.scoreMisses.Add(int64(len(misses)))
	if len(misses) > 0 || nf > 0 {
		var firstErr atomic.Pointer[fwk.Status]
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		run := func(i int, list []int, out []int64) bool {
			for k, idx := range list {
				pl := c.pp.score[idx]
				v, s := pl.Score(sctx, state, pod, feasible[i])
				if !s.IsSuccess() {
					firstErr.CompareAndSwap(nil, fwk.AsStatus(fmt.Errorf("running Score plugins: plugin %q failed with: %w", pl.Name(), s.AsError())))
					cancel()
					return false
				}
				out[k] = v
			}
			return true
		}
		miss := func(i int) {
			if run(i, c.cScore, rows[i]) {
				if e := &c.entries[pos[i]]; c.valid(e, feasible[i]) {
					e.sEpoch = c.sEpoch
				}
			}
		}
		if nf == 0 {
			f.Parallelizer().Until(sctx, len(misses), func(k int) { miss(misses[k]) }, "Score")
		} else {
			// Every node has fresh work; a node's cacheable scores are computed beside it
			// when not stored (misses is in order).
			f.Parallelizer().Until(sctx, n, func(i int) {
				if _, found := slices.BinarySearch(misses, i); found {
					miss(i)
				}
				run(i, c.fScore, fresh[i*nf:(i+1)*nf])
			}, "Score")
		}
		if s := firstErr.Load(); s != nil {
			return nil, s
		}
	}
	for j, slot := range c.scoreSlots {
		list := c.lists[j]
		if cap(list) < n {
			list = make(fwk.NodeScoreList, n)
			c.lists[j] = list
		}
		list = list[:n]
		for i := range list {
			var v int64
			if slot.cacheable {
				v = rows[i][slot.k]
			} else {
				v = fresh[i*nf+slot.k]
			}
			list[i] = fwk.NodeScore{Name: scores[i].Name, Score: v}
		}
		pl := c.pp.score[slot.plugin]
		if ext := pl.ScoreExtensions(); ext != nil {
			if s := ext.NormalizeScore(ctx, state, pod, list); !s.IsSuccess() {
				return nil, fwk.AsStatus(fmt.Errorf("running Normalize on Score plugins: plugin %q failed with: %w", pl.Name(), s.AsError()))
			}
		}
		w := c.pp.weight[slot.plugin]
		for i := range list {
			v := list[i].Score
			if v > fwk.MaxScore || v < fwk.MinScore {
				return nil, fwk.AsStatus(fmt.Errorf("applying score defaultWeights on Score plugins: plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing",
					pl.Name(), v, fwk.MinScore, fwk.MaxScore))
			}
			scores[i].TotalScore += v * w
		}
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
	if len(spec.ResourceClaims) > 0 || len(spec.EphemeralContainers) > 0 ||
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
