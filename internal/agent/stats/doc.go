// Package stats measures the node and its pods as the kubelet reports them: the statsapi
// Summary of /stats/summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1), the resource metrics
// of /metrics/resource that metrics-server scrapes, and cAdvisor-shaped container metrics
// for /metrics/cadvisor.
//
// Container CPU, memory and writable-layer usage come from the runtime through CRI
// (ListContainerStats, which containerd 1.6 answers on cgroup v1 and v2); a container the
// runtime gives no CPU or memory figures for is read from its cgroup files instead
// (cgroup.go: cpuacct.usage and memory.usage_in_bytes on v1, cpu.stat and memory.current
// on v2). Pod CPU and memory are the sums of their containers'; pod network is read from
// the sandbox's network namespace (/proc/<pid>/net/dev of its pause process). The node's
// CPU, memory, processes and network come from /proc, its filesystems from statfs of the
// agent's data directory (nodefs) and of the runtime's image filesystem (imagefs); logs and
// local volumes are measured as du does (allocated blocks). A persistentVolumeClaim volume
// is reported with its pvcRef, its directory found in the runtime's mounts of the pod's
// containers (claims.go).
//
// A [Provider] makes one [statsapi.Summary] per call; [NewResourceCollector],
// [NewCadvisorCollector] and [NewVolumeCollector] turn it into Prometheus metrics with the
// kubelet's names and labels, each a table of series (metrics.go: a row per series names
// its desc, the level of the Summary it reads — node, pod, container, interface or claim
// — its label values and its value).
package stats
