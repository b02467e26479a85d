package eviction

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's eviction status and message formats.
const (
	Reason                   = "Evicted"
	nodeLowMessageFmt        = "The node was low on resource: %v. "
	thresholdMetMessageFmt   = "Threshold quantity: %v, available: %v. "
	containerMessageFmt      = "Container %s was using %s, request is %s, has larger consumption of %v. "
	containerEphemeralFmt    = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralFmt          = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	emptyDirMessageFmt       = "Usage of EmptyDir volume %q exceeds the limit %q. "
	immediateEvictionSeconds = 1
)

// usage is a pod's usage of res: the memory working set, or its local ephemeral storage
// (also for inodes: the agent ranks inode pressure by bytes).
func usage(ps *statsapi.PodStats, res corev1.ResourceName) resource.Quantity {
	if ps == nil {
		return resource.Quantity{}
	}
	switch res {
	case corev1.ResourceMemory:
		if ps.Memory != nil && ps.Memory.WorkingSetBytes != nil {
			return *resource.NewQuantity(int64(*ps.Memory.WorkingSetBytes), resource.BinarySI)
		}
	default:
		if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
			return *resource.NewQuantity(int64(*ps.EphemeralStorage.UsedBytes), resource.BinarySI)
		}
	}
	return resource.Quantity{}
}

func request(pod *corev1.Pod, res corev1.ResourceName) resource.Quantity {
	if res != corev1.ResourceMemory {
		res = corev1.ResourceEphemeralStorage
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[res]
}

func priority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// Rank orders pods for eviction to reclaim res as the kubelet does: pods using more than
// they request first, then lower priority first, then the most usage above requests first.
// Pure.
func Rank(pods []*corev1.Pod, stats map[types.UID]*statsapi.PodStats, res corev1.ResourceName) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	over := func(p *corev1.Pod) int64 {
		u := usage(stats[p.UID], res)
		r := request(p, res)
		u.Sub(r)
		return u.Value()
	}
	sort.SliceStable(out, func(i, j int) bool {
		oi, oj := over(out[i]), over(out[j])
		if (oi > 0) != (oj > 0) {
			return oi > 0
		}
		if pi, pj := priority(out[i]), priority(out[j]); pi != pj {
			return pi < pj
		}
		return oi > oj
	})
	return out
}

// Message is the kubelet's eviction message for pod, evicted to reclaim res under
// threshold t (quantity, available): the resource, the threshold, and each container using
// more than it requests. Pure.
func Message(res corev1.ResourceName, pod *corev1.Pod, ps *statsapi.PodStats, quantity, available resource.Quantity) string {
	msg := fmt.Sprintf(nodeLowMessageFmt, res) + fmt.Sprintf(thresholdMetMessageFmt, quantity.String(), available.String())
	if ps == nil {
		return msg
	}
	containers := append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, cst := range ps.Containers {
		for _, c := range containers {
			if c.Name != cst.Name {
				continue
			}
			req := c.Resources.Requests[res]
			var used *resource.Quantity
			switch res {
			case corev1.ResourceEphemeralStorage:
				if cst.Rootfs != nil && cst.Rootfs.UsedBytes != nil && cst.Logs != nil && cst.Logs.UsedBytes != nil {
					used = resource.NewQuantity(int64(*cst.Rootfs.UsedBytes+*cst.Logs.UsedBytes), resource.BinarySI)
				}
			case corev1.ResourceMemory:
				if cst.Memory != nil && cst.Memory.WorkingSetBytes != nil {
					used = resource.NewQuantity(int64(*cst.Memory.WorkingSetBytes), resource.BinarySI)
				}
			}
			if used != nil && used.Cmp(req) > 0 {
				msg += fmt.Sprintf(containerMessageFmt, c.Name, used.String(), req.String(), res)
			}
			break
		}
	}
	return msg
}
