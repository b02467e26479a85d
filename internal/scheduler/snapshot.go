package scheduler

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// snapshot is what one scheduling cycle sees: copies of the nodes' NodeInfos, in the
// zone-interleaved order upstream's node tree gives, with the lists InterPodAffinity asks
// for. The scheduling loop alone updates it, between cycles (cache.updateSnapshot); plugins
// read it through fwk.SharedLister.
type snapshot struct {
	infos                   map[string]*framework.NodeInfo
	list                    []fwk.NodeInfo
	index                   map[string]int
	withAffinity            []fwk.NodeInfo
	withRequiredAnti        []fwk.NodeInfo
	withRequiredNonHostAnti []fwk.NodeInfo
	usedPVCs                map[string]int
	// version counts rebuilds of list (nodes added, removed, moved between zones): the
	// positions in list and the number of nodes are the same while it is.
	version uint64
}

var (
	_ fwk.SharedLister      = (*snapshot)(nil)
	_ fwk.NodeInfoLister    = (*snapshot)(nil)
	_ fwk.StorageInfoLister = (*snapshot)(nil)
)

func newSnapshot() *snapshot {
	return &snapshot{infos: map[string]*framework.NodeInfo{}, index: map[string]int{}, usedPVCs: map[string]int{}}
}

func (s *snapshot) rebuildAffinityLists() {
	s.withAffinity, s.withRequiredAnti, s.withRequiredNonHostAnti = s.withAffinity[:0], s.withRequiredAnti[:0], s.withRequiredNonHostAnti[:0]
	for _, n := range s.list {
		if len(n.GetPodsWithAffinity()) > 0 {
			s.withAffinity = append(s.withAffinity, n)
		}
		if len(n.GetPodsWithRequiredAntiAffinity()) > 0 {
			s.withRequiredAnti = append(s.withRequiredAnti, n)
		}
		if len(n.GetPodsWithRequiredNonHostScopedAntiAffinity()) > 0 {
			s.withRequiredNonHostAnti = append(s.withRequiredNonHostAnti, n)
		}
	}
}

func (s *snapshot) rebuildPVCs() {
	s.usedPVCs = map[string]int{}
	for _, n := range s.list {
		for k, v := range n.GetPVCRefCounts() {
			s.usedPVCs[k] += v
		}
	}
}

func (s *snapshot) NodeInfos() fwk.NodeInfoLister       { return s }
func (s *snapshot) StorageInfos() fwk.StorageInfoLister { return s }

func (s *snapshot) List() ([]fwk.NodeInfo, error)                     { return s.list, nil }
func (s *snapshot) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) { return s.withAffinity, nil }
func (s *snapshot) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.withRequiredAnti, nil
}
func (s *snapshot) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.withRequiredNonHostAnti, nil
}

func (s *snapshot) Get(name string) (fwk.NodeInfo, error) {
	if n, ok := s.infos[name]; ok && n.Node() != nil {
		return n, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

func (s *snapshot) IsPVCUsedByPods(key string) bool { return s.usedPVCs[key] > 0 }

// Pod groups (gang scheduling, the GenericWorkload gate) are not scheduled by Kube: the
// listers find none.
var errNoPodGroups = errors.New("pod groups are not supported by Kube's scheduler")

func (s *snapshot) PodGroupStates() fwk.PodGroupStateLister { return noPodGroupStates{} }
func (s *snapshot) PodGroups() fwk.PodGroupLister           { return noPodGroups{} }
func (s *snapshot) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return noCompositeStates{}
}
func (s *snapshot) CompositePodGroups() fwk.CompositePodGroupLister { return noComposites{} }

type (
	noPodGroups       struct{}
	noPodGroupStates  struct{}
	noComposites      struct{}
	noCompositeStates struct{}
)

func (noPodGroups) Get(string, string) (*schedulingv1beta1.PodGroup, error) {
	return nil, errNoPodGroups
}
func (noPodGroupStates) Get(string, string) (fwk.PodGroupState, error) { return nil, errNoPodGroups }
func (noComposites) Get(string, string) (*schedulingv1alpha3.CompositePodGroup, error) {
	return nil, errNoPodGroups
}
func (noCompositeStates) Get(string, string) (fwk.CompositePodGroupState, error) {
	return nil, errNoPodGroups
}

// The mutations of MutableSnapshotSharedLister serve pod-group preemption only.
var _ fwk.MutableSnapshotSharedLister = (*snapshot)(nil)

func (s *snapshot) StartMutations() error                        { return errNoPodGroups }
func (s *snapshot) EndMutations() error                          { return errNoPodGroups }
func (s *snapshot) AddPod(fwk.PodInfo, string) error             { return errNoPodGroups }
func (s *snapshot) RemovePod(klog.Logger, *v1.Pod, string) error { return errNoPodGroups }
