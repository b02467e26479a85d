package scheduler

import (
	"bytes"
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// interPodAffinityState is the CycleState key upstream's InterPodAffinity keeps its
// PreFilter state under (interpodaffinity's preFilterStateKey).
const interPodAffinityState fwk.StateKey = "PreFilter" + names.InterPodAffinity

// incrementalAffinity is upstream's InterPodAffinity (every method its own, embedded) with
// one change: PreFilter reuses the state it computed for an earlier pod of the same
// signature and brings it up to date with the plugin's own PreFilterExtensions — RemovePod
// for every pod of a node as the earlier state counted it, AddPod for every pod of the
// node as the snapshot has it now — for the nodes whose snapshot NodeInfo is another
// object than then. Upstream's PreFilter counts, for every node, every pod against the
// incoming pod's required terms and every required anti-affinity term of existing pods
// against the incoming pod (the largest part of a cycle for pods with required
// anti-affinity); between two consecutive pods usually one node changed (the pod assumed
// on it).
//
// The state is the same as upstream's PreFilter computes afresh: its three maps are counts
// of matches per topology pair, sums over the nodes of sums over their pods, each pod's
// term matched against the same pod and namespace labels as a fresh PreFilter would —
// upstream's AddPod/RemovePod (which preemption and nominated pods use on the same state)
// add and subtract exactly those terms, dropping pairs that reach 0 as a fresh count never
// holds them. What else the state holds comes from the incoming pod (its PodInfo, terms,
// namespace labels), which the signature fixes (namespace, labels, spec); the reused state
// keeps the earlier pod's PodInfo, which the plugin reads only for those.
//
// The state in a cycle's CycleState is base itself, not a copy (copying its maps, one
// entry per node holding a matching pod, was a seventh of a cycle): within the cycle it is
// only read (Filter; nominated pods and preemption work on CycleState clones), no plugin
// reads it after the cycle (the binding cycle runs no InterPodAffinity extension point),
// and the next PreFilter, which changes it, starts after the cycle ended (one scheduling
// loop).
//
// Only pods with required (anti-)affinity terms (PreFilter never skips them), none with a
// namespaceSelector (the namespaces it selects may change between cycles), no deferred
// resize, a signature the scheduling loop set for this very pod, the same namespace labels
// and the same number of nodes reuse the state; any other PreFilter is upstream's and
// starts afresh. The scheduling loop alone calls PreFilter.
type incrementalAffinity struct {
	*interpodaffinity.InterPodAffinity
	nsLister listersv1.NamespaceLister

	// Set by the scheduling loop (setPod) for the next PreFilter.
	pod *v1.Pod
	sig []byte

	base     fwk.StateData // the state for baseSig over the nodes of seen; nil: none
	baseSig  []byte
	baseNS   labels.Set
	seen     []fwk.NodeInfo // the NodeInfos base counts, in the snapshot's order
	tmpState *framework.CycleState

	reused, fresh int64 // PreFilters answered from base, and computed afresh
}

var (
	_ fwk.PreFilterPlugin   = (*incrementalAffinity)(nil)
	_ fwk.FilterPlugin      = (*incrementalAffinity)(nil)
	_ fwk.PreScorePlugin    = (*incrementalAffinity)(nil)
	_ fwk.ScorePlugin       = (*incrementalAffinity)(nil)
	_ fwk.EnqueueExtensions = (*incrementalAffinity)(nil)
	_ fwk.SignPlugin        = (*incrementalAffinity)(nil)
)

func newIncrementalAffinity(pl *interpodaffinity.InterPodAffinity, h fwk.Handle) *incrementalAffinity {
	return &incrementalAffinity{InterPodAffinity: pl, nsLister: h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		tmpState: framework.NewCycleState()}
}

// setPod names the pod the next PreFilter is for and its signature (nil: compute afresh).
func (a *incrementalAffinity) setPod(pod *v1.Pod, sig []byte) {
	if a != nil {
		a.pod, a.sig = pod, sig
	}
}

// reusable: pod's PreFilter state may be carried over between pods of one signature.
func reusable(pod *v1.Pod) bool {
	aff := pod.Spec.Affinity
	if aff == nil {
		return false
	}
	var terms []v1.PodAffinityTerm
	if aff.PodAffinity != nil {
		terms = append(terms, aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	if aff.PodAntiAffinity != nil {
		terms = append(terms, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if terms[i].NamespaceSelector != nil {
			return false
		}
	}
	return !resource.IsPodResizeDeferred(pod)
}

// PreFilter is upstream's, or its earlier result brought up to date (see the type).
func (a *incrementalAffinity) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	sig := a.sig
	if a.pod != pod {
		sig = nil
	}
	a.pod, a.sig = nil, nil
	if sig == nil || !reusable(pod) {
		a.base = nil
		return a.InterPodAffinity.PreFilter(ctx, cs, pod, nodes)
	}
	ns := interpodaffinity.GetNamespaceLabelsSnapshot(klog.FromContext(ctx), pod.Namespace, a.nsLister)
	if a.base != nil && bytes.Equal(sig, a.baseSig) && len(nodes) == len(a.seen) && maps.Equal(ns, a.baseNS) && a.update(ctx, pod, nodes) {
		a.reused++
		cs.Write(interPodAffinityState, a.base)
		return nil, nil
	}
	a.base = nil
	a.fresh++
	res, s := a.InterPodAffinity.PreFilter(ctx, cs, pod, nodes)
	if res != nil || !s.IsSuccess() {
		return res, s
	}
	if d, err := cs.Read(interPodAffinityState); err == nil {
		a.base, a.baseSig, a.baseNS = d, bytes.Clone(sig), ns
		a.seen = append(a.seen[:0], nodes...)
	}
	return res, s
}

// update brings base from the nodes of seen to nodes (as many), position by position: the
// pods of the NodeInfo counted there are taken out, the pods of the one there now put in.
// Past a quarter of the nodes changed (a rebuilt node list) it gives up: a fresh PreFilter
// is cheaper.
func (a *incrementalAffinity) update(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo) bool {
	changed := 0
	for i, ni := range nodes {
		if ni != a.seen[i] {
			if changed++; changed > len(nodes)/4+1 {
				return false
			}
		}
	}
	if changed == 0 {
		return true
	}
	a.tmpState.Write(interPodAffinityState, a.base)
	defer a.tmpState.Delete(interPodAffinityState)
	for i, ni := range nodes {
		old := a.seen[i]
		if ni == old {
			continue
		}
		for _, p := range old.GetPods() {
			if s := a.InterPodAffinity.RemovePod(ctx, a.tmpState, pod, p, old); !s.IsSuccess() {
				return false
			}
		}
		for _, p := range ni.GetPods() {
			if s := a.InterPodAffinity.AddPod(ctx, a.tmpState, pod, p, ni); !s.IsSuccess() {
				return false
			}
		}
		a.seen[i] = ni
	}
	return true
}
