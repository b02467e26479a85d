package garbagecollector

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Finalizers the API server adds for the Foreground and Orphan propagation policies.
const (
	finalizerForeground = metav1.FinalizerDeleteDependents
	finalizerOrphan     = metav1.FinalizerOrphanDependents
)

// node is what the graph knows about one object. Nodes are immutable once in the graph:
// an update replaces the node.
type node struct {
	gvr        schema.GroupVersionResource
	apiVersion string
	kind       string
	namespace  string
	name       string
	uid        types.UID
	rv         string
	owners     []metav1.OwnerReference
	finalizers []string
	deleting   bool // deletionTimestamp is set
}

func (n *node) has(finalizer string) bool { return slices.Contains(n.finalizers, finalizer) }

// deletingDependents says the object waits for its dependents (Foreground).
func (n *node) deletingDependents() bool { return n.deleting && n.has(finalizerForeground) }

// orphaning says the object waits for its dependents to be orphaned (Orphan).
func (n *node) orphaning() bool { return n.deleting && n.has(finalizerOrphan) }

// ownerRef returns n's reference to owner, if any.
func (n *node) ownerRef(owner types.UID) (metav1.OwnerReference, bool) {
	for _, r := range n.owners {
		if r.UID == owner {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// graph indexes every observed object by UID, and dependents by their owners' UIDs. Owners
// need not be in the graph (they may be gone, or of a kind not watched).
type graph struct {
	mu         sync.RWMutex
	nodes      map[types.UID]*node
	dependents map[types.UID]map[types.UID]struct{}
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]struct{}{}}
}

func (g *graph) get(uid types.UID) *node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.nodes[uid]
}

// put adds or replaces n and returns the node it replaced.
func (g *graph) put(n *node) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[n.uid]
	if old != nil {
		g.unlink(old)
	}
	g.nodes[n.uid] = n
	for _, r := range n.owners {
		deps := g.dependents[r.UID]
		if deps == nil {
			deps = map[types.UID]struct{}{}
			g.dependents[r.UID] = deps
		}
		deps[n.uid] = struct{}{}
	}
	return old
}

// remove drops the object uid; it returns the removed node, nil if there was none.
func (g *graph) remove(uid types.UID) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[uid]
	if old != nil {
		g.unlink(old)
		delete(g.nodes, uid)
	}
	return old
}

// removeResource drops every node of gvr (its resource is no longer served) and returns them.
func (g *graph) removeResource(gvr schema.GroupVersionResource) []*node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*node
	for uid, n := range g.nodes {
		if n.gvr == gvr {
			g.unlink(n)
			delete(g.nodes, uid)
			out = append(out, n)
		}
	}
	return out
}

func (g *graph) unlink(n *node) {
	for _, r := range n.owners {
		if deps := g.dependents[r.UID]; deps != nil {
			delete(deps, n.uid)
			if len(deps) == 0 {
				delete(g.dependents, r.UID)
			}
		}
	}
}

// dependentsOf returns the objects that name owner in their ownerReferences.
func (g *graph) dependentsOf(owner types.UID) []*node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	deps := g.dependents[owner]
	out := make([]*node, 0, len(deps))
	for uid := range deps {
		if n := g.nodes[uid]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// hasDependents says whether any object names owner.
func (g *graph) hasDependents(owner types.UID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.dependents[owner]) > 0
}

// blockingDependents returns owner's dependents whose reference has blockOwnerDeletion=true.
func blockingDependents(owner types.UID, deps []*node) []*node {
	var out []*node
	for _, d := range deps {
		if r, ok := d.ownerRef(owner); ok && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			out = append(out, d)
		}
	}
	return out
}

// ownerState is what a dependent's reference to its owner resolves to.
type ownerState int

const (
	ownerSolid    ownerState = iota // exists, not waiting for its dependents
	ownerDangling                   // gone, or another object with that name
	ownerWaiting                    // exists and is being deleted in the foreground
	ownerInvalid                    // a cluster-scoped dependent names a namespaced owner
)

// verdict is what to do with a dependent, given the states of its owners.
type verdict struct {
	// strip lists owner UIDs to remove from the dependent's ownerReferences (it keeps a
	// solid owner).
	strip []types.UID
	// delete says the dependent goes, with policy, after its references to the owners in
	// unblock get blockOwnerDeletion=false.
	delete  bool
	policy  metav1.DeletionPropagation
	unblock []types.UID
}

// decide is the garbage collector's rule for one dependent (upstream attemptToDeleteItem):
// with a solid owner it stays and loses its dangling and waiting references; without one
// it is deleted — in the foreground when an owner waits for it and it has dependents of its
// own (after unblocking those owners, so that cycles cannot deadlock), else in the
// background (or as its own finalizers say).
func decide(refs []metav1.OwnerReference, states []ownerState, hasDependents bool, own *node) verdict {
	var solid, dangling, waiting []types.UID
	for i, s := range states {
		switch s {
		case ownerSolid:
			solid = append(solid, refs[i].UID)
		case ownerDangling:
			dangling = append(dangling, refs[i].UID)
		case ownerWaiting:
			waiting = append(waiting, refs[i].UID)
		}
	}
	switch {
	case len(solid) > 0:
		return verdict{strip: append(dangling, waiting...)}
	case len(waiting) > 0 && hasDependents:
		var unblock []types.UID
		for i, s := range states {
			if s == ownerWaiting && refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
				unblock = append(unblock, refs[i].UID)
			}
		}
		return verdict{delete: true, policy: metav1.DeletePropagationForeground, unblock: unblock}
	case own != nil && own.has(finalizerOrphan):
		return verdict{delete: true, policy: metav1.DeletePropagationOrphan}
	case own != nil && own.has(finalizerForeground):
		return verdict{delete: true, policy: metav1.DeletePropagationForeground}
	default:
		return verdict{delete: true, policy: metav1.DeletePropagationBackground}
	}
}
