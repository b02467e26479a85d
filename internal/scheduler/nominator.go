package scheduler

import (
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// nominator remembers the node each preempting pod was nominated for (its victims are
// going), so that filters count it there meanwhile (RunFilterPluginsWithNominatedPods).
type nominator struct {
	nmu    sync.RWMutex
	byNode map[string][]fwk.PodInfo
	nodeOf map[types.UID]string
	count  atomic.Int32 // len(nodeOf), read without the lock
}

func (n *nominator) init() {
	n.byNode, n.nodeOf = map[string][]fwk.PodInfo{}, map[types.UID]string{}
}

// AddNominatedPod records pi at the node nominatingInfo names (ModeOverride) or at the
// pod's status.nominatedNodeName (ModeNoop).
func (n *nominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	n.addLocked(pi, ni)
}

func (n *nominator) addLocked(pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	pod := pi.GetPod()
	n.deleteLocked(pod)
	node := pod.Status.NominatedNodeName
	if ni.Mode() == fwk.ModeOverride {
		node = ni.NominatedNodeName
	}
	if node == "" || pod.Spec.NodeName != "" {
		return
	}
	n.nodeOf[pod.UID] = node
	n.count.Store(int32(len(n.nodeOf)))
	n.byNode[node] = append(n.byNode[node], pi)
}

func (n *nominator) DeleteNominatedPodIfExists(pod *v1.Pod) { n.delete(pod) }

func (n *nominator) delete(pod *v1.Pod) {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	n.deleteLocked(pod)
}

func (n *nominator) deleteLocked(pod *v1.Pod) {
	node, ok := n.nodeOf[pod.UID]
	if !ok {
		return
	}
	delete(n.nodeOf, pod.UID)
	n.count.Store(int32(len(n.nodeOf)))
	n.byNode[node] = slices.DeleteFunc(n.byNode[node], func(p fwk.PodInfo) bool { return p.GetPod().UID == pod.UID })
	if len(n.byNode[node]) == 0 {
		delete(n.byNode, node)
	}
}

// UpdateNominatedPod keeps a nomination made in memory whose status write has not come
// back yet (the new pod names no node, the old one did not either).
func (n *nominator) UpdateNominatedPod(_ klog.Logger, old *v1.Pod, pi fwk.PodInfo) {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	var ni *fwk.NominatingInfo
	if node, ok := n.nodeOf[old.UID]; ok && old.Status.NominatedNodeName == "" && pi.GetPod().Status.NominatedNodeName == "" {
		ni = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node}
	}
	n.addLocked(pi, ni)
}

// hasNominated tells whether any pod is nominated to node (cheaper than
// NominatedPodsForNode, which copies).
func (n *nominator) hasNominated(node string) bool {
	if n.count.Load() == 0 {
		return false
	}
	n.nmu.RLock()
	defer n.nmu.RUnlock()
	return len(n.byNode[node]) > 0
}

func (n *nominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	n.nmu.RLock()
	defer n.nmu.RUnlock()
	return slices.Clone(n.byNode[node])
}

func equalPods(a, b *v1.Pod) bool { return equality.Semantic.DeepEqual(a, b) }
