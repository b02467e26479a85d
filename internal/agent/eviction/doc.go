// Package eviction is the node agent's eviction manager, as the kubelet's: hard eviction
// thresholds on memory.available, nodefs.available/inodesFree and imagefs.available/
// inodesFree (--eviction-hard, upstream's syntax and defaults), the MemoryPressure and
// DiskPressure node conditions they raise (held for a transition period after the signal
// recovers), and the pods evicted to relieve them — one per pass, ranked as upstream ranks
// them (usage above requests first, then lower priority, then the most usage above
// requests) — plus the per-pod local storage limits (emptyDir sizeLimit, the pod's total
// and each container's ephemeral-storage limit), whose offenders are evicted at once.
//
// The decisions (thresholds.go, rank.go, limits.go) are pure: a statsapi Summary and the
// pods in, what to do out. [Manager] is the thin loop that measures every Interval and
// kills the chosen pod with the kubelet's status (phase Failed, reason Evicted, the
// message naming the resource).
package eviction
