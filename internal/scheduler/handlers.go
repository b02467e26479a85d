package scheduler

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// addHandlers feeds the cache and the queue from the informers: bound pods and nodes go
// to the cache, unbound pods of Kube's profiles to the queue, and every change a plugin
// registered for moves the unschedulable pods it may help.
func (r *run) addHandlers(factory informers.SharedInformerFactory, hooks map[string]*queueHooks) error {
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(r.handler(r.podAdd, r.podUpdate, r.podDelete)); err != nil {
		return err
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(r.handler(r.nodeAdd, r.nodeUpdate, r.nodeDelete)); err != nil {
		return err
	}
	// The other kinds plugins watch, each only if some plugin registered for it.
	wanted := sets.New[fwk.EventResource]()
	for _, h := range hooks {
		for _, evs := range h.events {
			for _, e := range evs {
				wanted.Insert(e.Event.Resource)
			}
		}
	}
	others := map[fwk.EventResource]func() cache.SharedIndexInformer{
		fwk.PersistentVolume:      factory.Core().V1().PersistentVolumes().Informer,
		fwk.PersistentVolumeClaim: factory.Core().V1().PersistentVolumeClaims().Informer,
		fwk.StorageClass:          factory.Storage().V1().StorageClasses().Informer,
		fwk.CSINode:               factory.Storage().V1().CSINodes().Informer,
		fwk.CSIDriver:             factory.Storage().V1().CSIDrivers().Informer,
		fwk.CSIStorageCapacity:    factory.Storage().V1().CSIStorageCapacities().Informer,
		fwk.VolumeAttachment:      factory.Storage().V1().VolumeAttachments().Informer,
		fwk.ResourceClaim:         factory.Resource().V1().ResourceClaims().Informer,
		fwk.ResourceSlice:         factory.Resource().V1().ResourceSlices().Informer,
		fwk.DeviceClass:           factory.Resource().V1().DeviceClasses().Informer,
	}
	for res, inf := range others {
		if !wanted.Has(res) && !wanted.Has(fwk.WildCard) {
			continue
		}
		res := res
		h := r.handler(
			func(o any) { r.queue.moveOnEvent(fwk.ClusterEvent{Resource: res, ActionType: fwk.Add}, nil, o) },
			func(o, n any) { r.queue.moveOnEvent(fwk.ClusterEvent{Resource: res, ActionType: fwk.Update}, o, n) },
			func(o any) { r.queue.moveOnEvent(fwk.ClusterEvent{Resource: res, ActionType: fwk.Delete}, o, nil) })
		if _, err := inf().AddEventHandler(h); err != nil {
			return err
		}
	}
	return nil
}

// responsible: an unbound, live pod one of the profiles schedules.
func (r *run) responsible(pod *v1.Pod) bool {
	_, ok := r.profiles[pod.Spec.SchedulerName]
	return ok && pod.Spec.NodeName == "" && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

func (r *run) podAdd(o any) {
	pod, ok := o.(*v1.Pod)
	if !ok {
		return
	}
	switch {
	case pod.Spec.NodeName != "":
		r.cache.addPod(pod)
		r.queue.moveOnEvent(framework.EventAssignedPodAdd, nil, pod)
	case r.responsible(pod):
		r.queue.add(pod)
	}
}

func (r *run) podUpdate(o, n any) {
	old, ok1 := o.(*v1.Pod)
	pod, ok2 := n.(*v1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == pod.ResourceVersion {
		return
	}
	switch {
	case pod.Spec.NodeName != "" && old.Spec.NodeName == "":
		r.queue.delete(old)
		r.cache.addPod(pod)
		r.queue.moveOnEvent(framework.EventAssignedPodAdd, nil, pod)
	case pod.Spec.NodeName != "":
		r.cache.addPod(pod)
		if !countsOnNode(pod) && countsOnNode(old) {
			r.queue.moveOnEvent(framework.EventAssignedPodDelete, old, nil)
			return
		}
		for _, e := range framework.PodSchedulingPropertiesChange(pod, old, false) {
			r.queue.moveOnEvent(e, old, pod)
		}
	case r.responsible(pod):
		r.queue.UpdateNominatedPod(logger, old, podInfo(pod))
		r.queue.update(pod)
	default:
		r.queue.delete(pod)
	}
}

func (r *run) podDelete(o any) {
	pod, ok := o.(*v1.Pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName != "" {
		r.cache.removePod(pod)
		r.queue.moveOnEvent(framework.EventAssignedPodDelete, pod, nil)
		return
	}
	r.queue.delete(pod)
}

func (r *run) nodeAdd(o any) {
	node, ok := o.(*v1.Node)
	if !ok {
		return
	}
	r.cache.setNode(node)
	r.queue.moveOnEvent(fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, node)
}

func (r *run) nodeUpdate(o, n any) {
	old, ok1 := o.(*v1.Node)
	node, ok2 := n.(*v1.Node)
	if !ok1 || !ok2 || old.ResourceVersion == node.ResourceVersion {
		return
	}
	r.cache.setNode(node)
	for _, e := range framework.NodeSchedulingPropertiesChange(node, old) {
		r.queue.moveOnEvent(e, old, node)
	}
}

func (r *run) nodeDelete(o any) {
	if node, ok := o.(*v1.Node); ok {
		r.cache.removeNode(node.Name)
	}
}

func podInfo(pod *v1.Pod) *framework.PodInfo {
	pi, _ := framework.NewPodInfo(pod)
	return pi
}
