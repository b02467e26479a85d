package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// userHZ is the kernel's USER_HZ, the unit of /proc/stat (100 on every Linux ABI).
const userHZ = 100

// host reads the machine's figures from a /proc.
type host struct{ proc string }

func (h host) read(name string) ([]byte, error) { return os.ReadFile(filepath.Join(h.proc, name)) }

// bootTime is btime of /proc/stat.
func (h host) bootTime() time.Time {
	b, err := h.read("stat")
	if err != nil {
		return time.Time{}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(n, 0)
		}
	}
	return time.Time{}
}

// cpuUsage is the CPU time the machine spent busy, in nanoseconds.
func (h host) cpuUsage() (uint64, error) {
	b, err := h.read("stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// parseProcStat sums the busy fields of /proc/stat's cpu line (user, nice, system, irq,
// softirq, steal; guest time is inside user) into nanoseconds. Pure.
func parseProcStat(b []byte) (uint64, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += v
	}
	return ticks * (uint64(time.Second) / userHZ), nil
}

type memory struct{ total, available, usage, workingSet uint64 }

func (h host) memory() (memory, error) {
	b, err := h.read("meminfo")
	if err != nil {
		return memory{}, err
	}
	return parseMeminfo(b)
}

// parseMeminfo is the node's memory as the kubelet sees its root cgroup: usage is what is
// not free, the working set is usage less inactive file pages, available is total less
// the working set (memory.available). Pure.
func parseMeminfo(b []byte) (memory, error) {
	kv := map[string]uint64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		kv[strings.TrimSuffix(f[0], ":")] = v * 1024
	}
	total, ok := kv["MemTotal"]
	if !ok {
		return memory{}, fmt.Errorf("/proc/meminfo: no MemTotal")
	}
	m := memory{total: total, usage: total - min(kv["MemFree"], total)}
	m.workingSet = m.usage - min(kv["Inactive(file)"], m.usage)
	m.available = total - m.workingSet
	return m, nil
}

// network reads /proc/<pid>/net/dev (the host's when pid is ""): every interface but
// loopback and the host side of pod veths; the default one is the default route's on the
// host, eth0 in a pod.
func (h host) network(t metav1.Time, pid string) *statsapi.NetworkStats {
	dir := h.proc
	if pid != "" {
		dir = filepath.Join(h.proc, pid)
	}
	b, err := os.ReadFile(filepath.Join(dir, "net", "dev"))
	if err != nil {
		return nil
	}
	ifs := parseNetDev(b)
	def := "eth0"
	if pid == "" {
		def = h.defaultInterface()
	}
	out := &statsapi.NetworkStats{Time: t}
	for _, i := range ifs {
		if i.Name == "lo" || strings.HasPrefix(i.Name, "veth") {
			continue
		}
		out.Interfaces = append(out.Interfaces, i)
		if i.Name == def {
			out.InterfaceStats = i
		}
	}
	if out.InterfaceStats.Name == "" && len(out.Interfaces) > 0 {
		out.InterfaceStats = out.Interfaces[0]
	}
	return out
}

// parseNetDev reads /proc/net/dev. Pure.
func parseNetDev(b []byte) []statsapi.InterfaceStats {
	var out []statsapi.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			continue
		}
		u := func(i int) *uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return &v }
		out = append(out, statsapi.InterfaceStats{Name: strings.TrimSpace(name), RxBytes: u(0), RxErrors: u(2), TxBytes: u(8), TxErrors: u(10)})
	}
	return out
}

func (h host) defaultInterface() string {
	b, err := h.read("net/route")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[1] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// rlimit is the process limit and count (PID pressure).
func (h host) rlimit(t metav1.Time) *statsapi.RlimitStats {
	out := &statsapi.RlimitStats{Time: t}
	if b, err := h.read("sys/kernel/pid_max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			out.MaxPID = &v
		}
	}
	if b, err := h.read("loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 3 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				if v, err := strconv.ParseInt(total, 10, 64); err == nil {
					out.NumOfRunningProcesses = &v
				}
			}
		}
	}
	return out
}

// statFs is the filesystem holding path.
func statFs(path string, t metav1.Time) (*statsapi.FsStats, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return nil, err
	}
	bs := uint64(s.Bsize)
	return &statsapi.FsStats{Time: t,
		CapacityBytes: ptrU(s.Blocks * bs), AvailableBytes: ptrU(s.Bavail * bs), UsedBytes: ptrU((s.Blocks - s.Bfree) * bs),
		Inodes: ptrU(s.Files), InodesFree: ptrU(s.Ffree), InodesUsed: ptrU(s.Files - s.Ffree)}, nil
}

// du is the disk space allocated below dir and its inode count, as `du` counts them (a
// missing dir is empty). It does not cross into other filesystems.
func du(dir string) (bytes, inodes uint64) {
	var root syscall.Stat_t
	if syscall.Lstat(dir, &root) != nil {
		return 0, 0
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil {
			return nil
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		bytes += uint64(st.Blocks) * 512
		inodes++
		return nil
	})
	return bytes, inodes
}
