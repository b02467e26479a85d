package eviction

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// LocalStorageViolation is why pod must be evicted for its local storage, checked in the
// kubelet's order: an emptyDir over its sizeLimit (Memory medium excepted: the kernel
// enforces tmpfs), the pod's total ephemeral storage over the sum of its containers'
// limits, a container's logs and writable layer over its own limit. "" when none. Pure.
func LocalStorageViolation(pod *corev1.Pod, ps *statsapi.PodStats) string {
	if ps == nil {
		return ""
	}
	used := map[string]*uint64{}
	for _, v := range ps.VolumeStats {
		used[v.Name] = v.UsedBytes
	}
	for _, v := range pod.Spec.Volumes {
		ed := v.EmptyDir
		if ed == nil || ed.Medium == corev1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		if u := used[v.Name]; u != nil && resource.NewQuantity(int64(*u), resource.BinarySI).Cmp(*ed.SizeLimit) > 0 {
			return fmt.Sprintf(emptyDirMessageFmt, v.Name, ed.SizeLimit.String())
		}
	}
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceEphemeralStorage]; ok {
		total := resource.Quantity{}
		if e := ps.EphemeralStorage; e != nil && e.UsedBytes != nil {
			total = *resource.NewQuantity(int64(*e.UsedBytes), resource.BinarySI)
		}
		if total.Cmp(limit) > 0 {
			return fmt.Sprintf(podEphemeralFmt, limit.String())
		}
	}
	limits := map[string]resource.Quantity{}
	for _, c := range pod.Spec.Containers {
		if l, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		if l, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, cst := range ps.Containers {
		l, ok := limits[cst.Name]
		if !ok {
			continue
		}
		var u uint64
		if cst.Logs != nil && cst.Logs.UsedBytes != nil {
			u += *cst.Logs.UsedBytes
		}
		if cst.Rootfs != nil && cst.Rootfs.UsedBytes != nil {
			u += *cst.Rootfs.UsedBytes
		}
		if l.Cmp(*resource.NewQuantity(int64(u), resource.BinarySI)) < 0 {
			return fmt.Sprintf(containerEphemeralFmt, cst.Name, l.String())
		}
	}
	return ""
}
