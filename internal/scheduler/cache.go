package scheduler

import (
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nodeCache is the scheduler's view of the cluster: every node with the pods on it, bound or
// assumed (chosen by a scheduling cycle, binding in flight). Informer handlers and binding
// goroutines change it; the scheduling loop copies what changed into its snapshot before
// each cycle. Nodes are kept as upstream's framework.NodeInfo, which the plugins read.
type nodeCache struct {
	mu     sync.Mutex
	nodes  map[string]*framework.NodeInfo // a pod may name a node not seen yet: node() nil
	pods   map[types.UID]*podState
	images map[string]*fwk.ImageStateSummary
	tree   nodeTree
	// dirty names the nodes changed since the last snapshot; treeChanged says the node
	// set or a node's zone changed (the snapshot's node order is rebuilt).
	dirty       sets.Set[string]
	treeChanged bool
}

type podState struct {
	pod     *v1.Pod
	assumed bool
}

func newNodeCache() *nodeCache {
	return &nodeCache{nodes: map[string]*framework.NodeInfo{}, pods: map[types.UID]*podState{},
		images: map[string]*fwk.ImageStateSummary{}, tree: newNodeTree(), dirty: sets.New[string]()}
}

var logger = klog.Background()

func (c *nodeCache) nodeInfo(name string) *framework.NodeInfo {
	n, ok := c.nodes[name]
	if !ok {
		n = framework.NewNodeInfo()
		c.nodes[name] = n
	}
	c.dirty.Insert(name)
	return n
}

// addPodLocked puts pod on its node's NodeInfo.
func (c *nodeCache) addPodLocked(pod *v1.Pod, assumed bool) {
	pi, _ := framework.NewPodInfo(pod) // an affinity term that does not parse counts as none, as upstream
	c.nodeInfo(pod.Spec.NodeName).AddPodInfo(pi)
	c.pods[pod.UID] = &podState{pod: pod, assumed: assumed}
}

func (c *nodeCache) removePodLocked(pod *v1.Pod) {
	delete(c.pods, pod.UID)
	n, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return
	}
	_ = n.RemovePod(logger, pod)
	c.dirty.Insert(pod.Spec.NodeName)
	if n.Node() == nil && len(n.Pods) == 0 {
		delete(c.nodes, pod.Spec.NodeName)
	}
}

// assume counts pod (its spec.nodeName set to the chosen node) on that node until the
// informer reports it bound or forget takes it back.
func (c *nodeCache) assume(pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[pod.UID]; ok {
		return fmt.Errorf("pod %s/%s is already in the scheduler cache", pod.Namespace, pod.Name)
	}
	c.addPodLocked(pod, true)
	return nil
}

// forget takes back an assumed pod whose binding failed.
func (c *nodeCache) forget(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pod.UID]; ok && st.assumed {
		c.removePodLocked(st.pod)
	}
}

func (c *nodeCache) isAssumed(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[uid]
	return ok && st.assumed
}

// addPod records a bound pod (the informer's view), replacing its assumed copy — unless
// the bound pod is the assumed one as the plugins see it (sameOnNode): then the node keeps
// the assumed copy, its NodeInfo unchanged (no new generation: the snapshot is not copied
// again and the equivalence cache's entries for the node stay valid).
func (c *nodeCache) addPod(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pod.UID]; ok {
		if st.assumed && countsOnNode(pod) && sameOnNode(st.pod, pod) {
			st.assumed = false
			return
		}
		c.removePodLocked(st.pod)
	}
	if !countsOnNode(pod) {
		return
	}
	c.addPodLocked(pod, false)
}

func (c *nodeCache) removePod(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pod.UID]; ok {
		c.removePodLocked(st.pod)
	}
}

// sameOnNode: a and b differ at most in what a binding writes beside spec.nodeName (the
// same in both here) — resourceVersion, generation, managedFields and the PodScheduled
// condition —, none of which a plugin or preemption reads of a pod on a node.
func sameOnNode(a, b *v1.Pod) bool {
	x, y := *a, *b // shallow copies: only fields are replaced, nothing is written through
	x.ResourceVersion, y.ResourceVersion = "", ""
	x.Generation, y.Generation = 0, 0
	x.ManagedFields, y.ManagedFields = nil, nil
	x.Status.Conditions, y.Status.Conditions = otherConditions(a.Status.Conditions), otherConditions(b.Status.Conditions)
	return equality.Semantic.DeepEqual(&x, &y)
}

func otherConditions(cs []v1.PodCondition) []v1.PodCondition {
	if !slices.ContainsFunc(cs, func(c v1.PodCondition) bool { return c.Type == v1.PodScheduled }) {
		return cs
	}
	out := slices.DeleteFunc(slices.Clone(cs), func(c v1.PodCondition) bool { return c.Type == v1.PodScheduled })
	if len(out) == 0 {
		return nil
	}
	return out
}

// countsOnNode: pods that ended hold nothing on their node (upstream's informer does not
// even list them).
func countsOnNode(pod *v1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

func (c *nodeCache) setNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodeInfo(node.Name)
	if old := n.Node(); old != nil {
		c.removeImagesLocked(old)
	}
	c.addImagesLocked(node, n)
	n.SetNode(node)
	if c.tree.set(node) {
		c.treeChanged = true
	}
}

func (c *nodeCache) removeNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		return
	}
	if old := n.Node(); old != nil {
		c.removeImagesLocked(old)
	}
	c.tree.remove(name)
	c.treeChanged = true
	c.dirty.Insert(name)
	if len(n.Pods) == 0 {
		delete(c.nodes, name)
	} else {
		n.RemoveNode()
	}
}

func (c *nodeCache) addImagesLocked(node *v1.Node, n *framework.NodeInfo) {
	sum := map[string]*fwk.ImageStateSummary{}
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			st, ok := c.images[name]
			if !ok {
				st = &fwk.ImageStateSummary{Size: image.SizeBytes, Nodes: sets.New[string]()}
				c.images[name] = st
			}
			st.Nodes.Insert(node.Name)
			sum[name] = st
		}
	}
	n.ImageStates = sum
}

func (c *nodeCache) removeImagesLocked(node *v1.Node) {
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			if st, ok := c.images[name]; ok {
				st.Nodes.Delete(node.Name)
				if st.Nodes.Len() == 0 {
					delete(c.images, name)
				}
			}
		}
	}
}

// updateSnapshot brings s up to date: only the nodes changed since the last call are
// copied; the node order is rebuilt only when the node set changed.
func (c *nodeCache) updateSnapshot(s *snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty.Len() == 0 && !c.treeChanged {
		return
	}
	affinityChanged, pvcChanged := c.treeChanged, c.treeChanged
	for name := range c.dirty {
		old := s.infos[name]
		n, ok := c.nodes[name]
		if !ok || n.Node() == nil {
			if old != nil {
				delete(s.infos, name)
				affinityChanged, pvcChanged = true, true
			}
			continue
		}
		clone := n.SnapshotConcrete()
		if old != nil {
			affinityChanged = affinityChanged || len(old.PodsWithAffinity) > 0 || len(old.PodsWithRequiredAntiAffinity) > 0
			pvcChanged = pvcChanged || len(old.PVCRefCounts) > 0
			if i, ok := s.index[name]; ok {
				s.list[i] = clone
			}
		} else {
			c.treeChanged = true
		}
		affinityChanged = affinityChanged || len(clone.PodsWithAffinity) > 0 || len(clone.PodsWithRequiredAntiAffinity) > 0
		pvcChanged = pvcChanged || len(clone.PVCRefCounts) > 0
		s.infos[name] = clone
	}
	c.dirty = sets.New[string]()
	if c.treeChanged {
		s.list = s.list[:0]
		s.index = make(map[string]int, len(s.infos))
		for _, name := range c.tree.list() {
			if n, ok := s.infos[name]; ok {
				s.index[name] = len(s.list)
				s.list = append(s.list, n)
			}
		}
		c.treeChanged = false
		s.version++
	}
	if affinityChanged {
		s.rebuildAffinityLists()
	}
	if pvcChanged {
		s.rebuildPVCs()
	}
}
