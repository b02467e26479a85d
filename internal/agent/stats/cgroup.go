package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupUsage is a cgroup's cumulative CPU time (ns) and memory (bytes).
type cgroupUsage struct{ cpu, usage, workingSet uint64 }

// readCgroup reads the usage of the cgroup process pid is in, under cgroup v1 (cpuacct and
// memory controllers, mounted apart or together) or v2 (the unified hierarchy) mounted at
// root.
func readCgroup(proc string, pid int, root string) (cgroupUsage, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return cgroupUsage{}, err
	}
	paths := parseProcCgroup(string(b))
	if p, ok := paths[""]; ok && len(paths) == 1 {
		return readCgroupV2(filepath.Join(root, p))
	}
	var u cgroupUsage
	cpuDir, ok := paths["cpuacct"]
	if !ok {
		return u, fmt.Errorf("pid %d: no cpuacct cgroup", pid)
	}
	memDir, ok := paths["memory"]
	if !ok {
		return u, fmt.Errorf("pid %d: no memory cgroup", pid)
	}
	cpu, err := readUint(firstExisting(filepath.Join(root, "cpuacct", cpuDir, "cpuacct.usage"), filepath.Join(root, "cpu,cpuacct", cpuDir, "cpuacct.usage")))
	if err != nil {
		return u, err
	}
	usage, err := readUint(filepath.Join(root, "memory", memDir, "memory.usage_in_bytes"))
	if err != nil {
		return u, err
	}
	stat, _ := os.ReadFile(filepath.Join(root, "memory", memDir, "memory.stat"))
	inactive := statField(string(stat), "total_inactive_file")
	return cgroupUsage{cpu: cpu, usage: usage, workingSet: usage - min(inactive, usage)}, nil
}

func readCgroupV2(dir string) (cgroupUsage, error) {
	stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return cgroupUsage{}, err
	}
	usage, err := readUint(filepath.Join(dir, "memory.current"))
	if err != nil {
		return cgroupUsage{}, err
	}
	mstat, _ := os.ReadFile(filepath.Join(dir, "memory.stat"))
	inactive := statField(string(mstat), "inactive_file")
	return cgroupUsage{cpu: statField(string(stat), "usage_usec") * 1000, usage: usage, workingSet: usage - min(inactive, usage)}, nil
}

// parseProcCgroup maps each controller of /proc/<pid>/cgroup to its path ("" is cgroup
// v2's unified hierarchy). Pure.
func parseProcCgroup(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			out[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out
}

// statField is the value of key in a cgroup stat file ("key value" lines). Pure.
func statField(s, key string) uint64 {
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return paths[0]
}
