package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Hierarchy creates, configures and removes the node's pod cgroups under Mount.
type Hierarchy struct {
	// Mount is where cgroups are mounted (default /sys/fs/cgroup).
	Mount string
	// Root is the parent of kubepods, as the kubelet's --cgroup-root (default "/").
	Root string
	v2   bool
}

// v1Written are the v1 controllers whose directories the hierarchy creates and writes;
// the runtime creates the pod's directory in the other controllers itself.
var v1Written = []string{"cpu", "cpuacct", "memory", "pids"}

// New detects the cgroup version under mount ("" is /sys/fs/cgroup).
func New(mount, root string) (*Hierarchy, error) {
	if mount == "" {
		mount = "/sys/fs/cgroup"
	}
	if root == "" {
		root = "/"
	}
	h := &Hierarchy{Mount: mount, Root: filepath.Clean("/" + root)}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		h.v2 = true
	} else if _, err := os.Stat(filepath.Join(mount, "memory")); err != nil {
		return nil, fmt.Errorf("cgroups: neither cgroup v2 nor a v1 memory controller under %s", mount)
	}
	return h, nil
}

// V2 reports whether the unified hierarchy is in use.
func (h *Hierarchy) V2() bool { return h.v2 }

// kubepods is the cgroupfs name of the pods' root.
func (h *Hierarchy) kubepods() string { return filepath.Join(h.Root, "kubepods") }

// PodParent is the cgroupfs name of pod's cgroup, the sandbox's CgroupParent. Pure.
func (h *Hierarchy) PodParent(pod *corev1.Pod) string {
	return filepath.Join(h.kubepods(), QOSDir(pod), "pod"+string(pod.UID))
}

// EnsureNode creates kubepods and its QoS directories and gives kubepods the node's
// allocatable (ForNode) and besteffort the minimum cpu.shares.
func (h *Hierarchy) EnsureNode(allocatable corev1.ResourceList) error {
	if err := h.ensure(h.kubepods(), ForNode(allocatable)); err != nil {
		return err
	}
	if err := h.ensure(filepath.Join(h.kubepods(), "burstable"), Config{}); err != nil {
		return err
	}
	return h.ensure(filepath.Join(h.kubepods(), "besteffort"), Config{CPUShares: minShares})
}

// SetBurstable gives the burstable directory the sum of its pods' CPU requests as
// cpu.shares, as the kubelet's QoS manager does.
func (h *Hierarchy) SetBurstable(milli int64) error {
	return h.write(filepath.Join(h.kubepods(), "burstable"), Config{CPUShares: Shares(milli)})
}

// EnsurePod creates pod's cgroup with ForPod's Config and returns its cgroupfs name.
func (h *Hierarchy) EnsurePod(pod *corev1.Pod) (string, error) {
	name := h.PodParent(pod)
	return name, h.ensure(name, ForPod(pod))
}

// RemovePod removes the cgroup of the pod with uid wherever its QoS class put it, in every
// controller, deepest directories first; cgroups still holding processes stay (and the
// error says so).
func (h *Hierarchy) RemovePod(uid types.UID) error {
	var errs []error
	for _, qos := range []string{"", "burstable", "besteffort"} {
		name := filepath.Join(h.kubepods(), qos, "pod"+string(uid))
		for _, dir := range h.dirs(name) {
			errs = append(errs, removeTree(dir))
		}
	}
	return errors.Join(errs...)
}

// PodUIDs are the uids of the pod cgroups under kubepods (any QoS class, any controller):
// with the pods the node knows, what orphan collection compares.
func (h *Hierarchy) PodUIDs() []types.UID {
	seen := map[types.UID]bool{}
	var out []types.UID
	for _, qos := range []string{"", "burstable", "besteffort"} {
		for _, dir := range h.dirs(filepath.Join(h.kubepods(), qos)) {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				uid, ok := strings.CutPrefix(e.Name(), "pod")
				if !e.IsDir() || !ok || uid == "" || seen[types.UID(uid)] {
					continue
				}
				seen[types.UID(uid)] = true
				out = append(out, types.UID(uid))
			}
		}
	}
	return out
}

// Close removes the QoS directories and kubepods when no pod cgroup is left in them.
func (h *Hierarchy) Close() {
	for _, name := range []string{filepath.Join(h.kubepods(), "burstable"), filepath.Join(h.kubepods(), "besteffort"), h.kubepods()} {
		for _, dir := range h.dirs(name) {
			_ = os.Remove(dir)
		}
	}
	if h.Root != "/" {
		for _, dir := range h.dirs(h.Root) {
			_ = os.Remove(dir)
		}
	}
}

// Remove removes the whole hierarchy, pods' cgroups included (and Root when it is not
// "/"), deepest first; cgroups still holding processes stay. For tests and a node's
// cleanup once its pods are gone.
func (h *Hierarchy) Remove() error {
	name := h.kubepods()
	if h.Root != "/" {
		name = h.Root
	}
	var errs []error
	for _, dir := range h.dirs(name) {
		errs = append(errs, removeTree(dir))
	}
	return errors.Join(errs...)
}

// dirs are name's directories: the unified one, or one per mounted v1 controller.
func (h *Hierarchy) dirs(name string) []string {
	if h.v2 {
		return []string{filepath.Join(h.Mount, name)}
	}
	var out []string
	ents, _ := os.ReadDir(h.Mount)
	for _, e := range ents {
		// Symlinks (cpu -> cpu,cpuacct) name a controller listed under its own name too.
		if fi, err := os.Lstat(filepath.Join(h.Mount, e.Name())); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(h.Mount, e.Name(), name))
		}
	}
	return out
}

// ensure creates name (and its parents) and writes cfg into it.
func (h *Hierarchy) ensure(name string, cfg Config) error {
	if h.v2 {
		// Each level must hand the controllers down to the next.
		parts := strings.Split(strings.Trim(name, "/"), "/")
		dir := h.Mount
		for _, p := range parts {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0o644)
			dir = filepath.Join(dir, p)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("cgroups: %w", err)
			}
		}
	} else {
		for _, ctrl := range v1Written {
			base := filepath.Join(h.Mount, ctrl)
			if _, err := os.Stat(base); err != nil {
				continue // controller not mounted
			}
			if err := os.MkdirAll(filepath.Join(base, name), 0o755); err != nil {
				return fmt.Errorf("cgroups: %w", err)
			}
		}
	}
	return h.write(name, cfg)
}

// write sets cfg's fields in name's files.
func (h *Hierarchy) write(name string, cfg Config) error {
	type file struct{ ctrl, name, value string }
	var files []file
	if h.v2 {
		if cfg.CPUShares > 0 {
			files = append(files, file{"", "cpu.weight", strconv.FormatUint(Weight(cfg.CPUShares), 10)})
		}
		quota := "max"
		if cfg.CPUQuota > 0 {
			quota = strconv.FormatInt(cfg.CPUQuota, 10)
		}
		files = append(files, file{"", "cpu.max", quota + " " + strconv.FormatUint(max(cfg.CPUPeriod, period), 10)})
		mem := "max"
		if cfg.MemoryLimit > 0 {
			mem = strconv.FormatInt(cfg.MemoryLimit, 10)
		}
		files = append(files, file{"", "memory.max", mem})
	} else {
		if cfg.CPUShares > 0 {
			files = append(files, file{"cpu", "cpu.shares", strconv.FormatUint(cfg.CPUShares, 10)})
		}
		if cfg.CPUQuota > 0 {
			files = append(files, file{"cpu", "cpu.cfs_period_us", strconv.FormatUint(cfg.CPUPeriod, 10)},
				file{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(cfg.CPUQuota, 10)})
		}
		if cfg.MemoryLimit > 0 {
			files = append(files, file{"memory", "memory.limit_in_bytes", strconv.FormatInt(cfg.MemoryLimit, 10)})
		}
	}
	var errs []error
	for _, f := range files {
		p := filepath.Join(h.Mount, f.ctrl, name, f.name)
		if err := os.WriteFile(p, []byte(f.value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("cgroups: %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeTree removes dir's sub-directories deepest first, then dir (cgroup directories
// hold only pseudo-files, which rmdir takes with them).
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, removeTree(filepath.Join(dir, e.Name())))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
