// Package cgroups keeps the node's pod cgroup hierarchy as the kubelet lays it out with
// the cgroupfs driver:
//
//	<root>/kubepods                       cpu.shares and memory limit of the node's allocatable
//	<root>/kubepods/pod<uid>              a Guaranteed pod
//	<root>/kubepods/burstable/pod<uid>    a Burstable pod
//	<root>/kubepods/besteffort/pod<uid>   a BestEffort pod (cpu.shares 2)
//
// A pod's cgroup carries the pod's whole CPU request as cpu.shares, and the sum of its
// containers' CPU and memory limits as CFS quota and memory limit when every container
// has one (ForPod, pure, as the kubelet's ResourceConfigForPod); the pod's sandbox is run
// with the pod cgroup as its CgroupParent, so the runtime puts the sandbox and every
// container below it. Both cgroup v1 (one hierarchy per controller: cpu, cpuacct, memory,
// pids are written; the runtime creates the pod's directory in the others) and v2 (one
// unified hierarchy, controllers enabled through cgroup.subtree_control; cpu.weight
// converted from shares) are handled.
//
// Hierarchy is the I/O shell: EnsureNode once at start, EnsurePod before a pod's sandbox
// runs, RemovePod once its sandboxes are gone, Close at exit (removes the QoS directories
// when no pod is left in them, best effort).
package cgroups
