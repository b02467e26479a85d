package cgroups

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// Config is what a cgroup is given; zero fields are left unset.
type Config struct {
	CPUShares   uint64 // cgroup v1 cpu.shares (v2: converted to cpu.weight)
	CPUQuota    int64  // CFS quota in µs per CPUPeriod
	CPUPeriod   uint64 // CFS period in µs
	MemoryLimit int64  // bytes
}

const (
	minShares = 2
	maxShares = 262144
	// period is the CFS period the kubelet uses (cpuCFSQuotaPeriod, 100 ms).
	period = 100000
	// minQuota is the kernel's smallest CFS quota (1 ms).
	minQuota = 1000
)

// Shares is cpu.shares for milli CPUs: 1024 per CPU, at least 2. Pure.
func Shares(milli int64) uint64 {
	s := milli * 1024 / 1000
	return uint64(min(max(s, minShares), maxShares))
}

// Quota is the CFS quota for a limit of milli CPUs over period. Pure.
func Quota(milli int64) int64 { return max(milli*period/1000, minQuota) }

// Weight is the cgroup v2 cpu.weight for v1 cpu.shares (runc's conversion). Pure.
func Weight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// QOSDir is the directory of pod's QoS class under kubepods: "" for Guaranteed. Pure.
func QOSDir(pod *corev1.Pod) string {
	switch qos.GetPodQOS(pod) {
	case corev1.PodQOSGuaranteed:
		return ""
	case corev1.PodQOSBurstable:
		return "burstable"
	default:
		return "besteffort"
	}
}

// ForPod is the pod cgroup's Config, as the kubelet's ResourceConfigForPod computes it:
// cpu.shares from the pod's CPU request (init containers, sidecars and overhead
// included; 2 for a BestEffort pod), CFS quota from the sum of CPU limits and the memory
// limit from the sum of memory limits, each only when every container has that limit.
// Pure.
func ForPod(pod *corev1.Pod) Config {
	if qos.GetPodQOS(pod) == corev1.PodQOSBestEffort {
		return Config{CPUShares: minShares}
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	lims := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuLimited, memLimited := true, true
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; !ok {
				cpuLimited = false
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				memLimited = false
			}
		}
	}
	cfg := Config{CPUShares: Shares(reqs.Cpu().MilliValue())}
	if cpuLimited {
		cfg.CPUQuota, cfg.CPUPeriod = Quota(lims.Cpu().MilliValue()), period
	}
	if memLimited {
		cfg.MemoryLimit = lims.Memory().Value()
	}
	return cfg
}

// ForNode is the kubepods cgroup's Config: the node's allocatable CPU as cpu.shares and
// its allocatable memory as the limit. Pure.
func ForNode(allocatable corev1.ResourceList) Config {
	cfg := Config{}
	if c, ok := allocatable[corev1.ResourceCPU]; ok {
		cfg.CPUShares = Shares(c.MilliValue())
	}
	if m, ok := allocatable[corev1.ResourceMemory]; ok {
		cfg.MemoryLimit = m.Value()
	}
	return cfg
}
