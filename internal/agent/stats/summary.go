package stats

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's labels on sandboxes and containers.
const (
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodUID       = "io.kubernetes.pod.uid"
	labelContainer    = "io.kubernetes.container.name"
)

// Options configure a Provider.
type Options struct {
	// NodeName names the node in the Summary.
	NodeName string
	// Runtime and Images are the CRI services.
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// Pods are the pods bound to the node (their specs say which volumes to measure and
	// the containers' memory limits).
	Pods func() []*corev1.Pod
	// RootDir holds pod volumes (RootDir/pods/<uid>/volumes/<name>); LogDir the CRI logs
	// (LogDir/<ns>_<pod>_<uid>/<container>/).
	RootDir, LogDir string
	// NodeFsDir is a directory on the node's filesystem (nodefs): the agent's data dir.
	NodeFsDir string
	// ProcDir is /proc (tests: a fake).
	ProcDir string
}

// Provider makes Summaries. Safe for concurrent use.
type Provider struct {
	opts  Options
	rates rates

	mu      sync.Mutex
	pids    map[string]int                 // sandbox id → its pause process
	mounts  map[string][]*runtimeapi.Mount // running container id → its mounts (claims.go)
	claimDu map[string]duUsage             // claim directory → its last du (claims.go)
}

// NewProvider makes a Provider.
func NewProvider(o Options) *Provider {
	if o.ProcDir == "" {
		o.ProcDir = "/proc"
	}
	if o.Pods == nil {
		o.Pods = func() []*corev1.Pod { return nil }
	}
	return &Provider{opts: o, rates: rates{last: map[string]sample{}}, pids: map[string]int{}, mounts: map[string][]*runtimeapi.Mount{}, claimDu: map[string]duUsage{}}
}

// Summary measures the node and its running pods now. With cpuAndMemoryOnly it skips
// filesystems, volumes and network (what /metrics/resource needs, and cheap).
func (p *Provider) Summary(ctx context.Context, cpuAndMemoryOnly bool) (*statsapi.Summary, error) {
	now := time.Now()
	node, err := p.nodeStats(ctx, now, cpuAndMemoryOnly)
	if err != nil {
		return nil, err
	}
	pods, err := p.podStats(ctx, now, cpuAndMemoryOnly)
	if err != nil {
		return nil, err
	}
	p.rates.forgetBefore(now.Add(-5 * time.Minute))
	return &statsapi.Summary{Node: node, Pods: pods}, nil
}

func (p *Provider) nodeStats(ctx context.Context, now time.Time, cpuAndMemoryOnly bool) (statsapi.NodeStats, error) {
	t := metav1.NewTime(now)
	h := host{proc: p.opts.ProcDir}
	ns := statsapi.NodeStats{NodeName: p.opts.NodeName, StartTime: metav1.NewTime(h.bootTime())}
	if cpuNs, err := h.cpuUsage(); err == nil {
		ns.CPU = &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: &cpuNs, UsageNanoCores: p.rates.nanoCores("node", now, cpuNs)}
	}
	if m, err := h.memory(); err == nil {
		ns.Memory = &statsapi.MemoryStats{Time: t, AvailableBytes: &m.available, UsageBytes: &m.usage, WorkingSetBytes: &m.workingSet}
	}
	if cpuAndMemoryOnly {
		return ns, nil
	}
	ns.Network = h.network(t, "")
	ns.Rlimit = h.rlimit(t)
	if fs, err := statFs(p.opts.NodeFsDir, t); err == nil {
		ns.Fs = fs
	}
	if img, err := p.imageFs(ctx, t); err == nil {
		ns.Runtime = &statsapi.RuntimeStats{ImageFs: img, ContainerFs: img}
	}
	return ns, nil
}

// imageFs is the runtime's image filesystem: its usage from CRI, its size from statfs.
func (p *Provider) imageFs(ctx context.Context, t metav1.Time) (*statsapi.FsStats, error) {
	if p.opts.Images == nil {
		return nil, fmt.Errorf("no image service")
	}
	info, err := p.opts.Images.ImageFsInfo(ctx)
	if err != nil {
		return nil, err
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 {
		return nil, fmt.Errorf("the runtime reports no image filesystem")
	}
	f := fss[0]
	out := &statsapi.FsStats{Time: t}
	if mp := f.GetFsId().GetMountpoint(); mp != "" {
		if st, err := statFs(mp, t); err == nil {
			out = st
		}
	}
	if u := f.GetUsedBytes(); u != nil {
		out.UsedBytes = ptrU(u.Value)
	}
	if u := f.GetInodesUsed(); u != nil {
		out.InodesUsed = ptrU(u.Value)
	}
	return out, nil
}

// podStats measures every pod with a ready sandbox.
func (p *Provider) podStats(ctx context.Context, now time.Time, cpuAndMemoryOnly bool) ([]statsapi.PodStats, error) {
	rt := p.opts.Runtime
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, fmt.Errorf("stats: list sandboxes: %w", err)
	}
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("stats: list containers: %w", err)
	}
	cstats, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, fmt.Errorf("stats: container stats: %w", err)
	}
	byID := map[string]*runtimeapi.ContainerStats{}
	for _, s := range cstats {
		byID[s.GetAttributes().GetId()] = s
	}
	specs := map[types.UID]*corev1.Pod{}
	for _, pod := range p.opts.Pods() {
		specs[pod.UID] = pod
	}
	bySandbox := map[string][]*runtimeapi.Container{}
	for _, c := range cs {
		bySandbox[c.PodSandboxId] = append(bySandbox[c.PodSandboxId], c)
	}
	t := metav1.NewTime(now)
	var imgFs, logFs *statsapi.FsStats
	if !cpuAndMemoryOnly {
		imgFs, _ = p.imageFs(ctx, t)
		logFs, _ = statFs(p.opts.LogDir, t)
	}
	out := make([]statsapi.PodStats, 0, len(sbs))
	live := map[string]bool{}
	for _, sb := range sbs {
		live[sb.Id] = true
		md := sb.GetMetadata()
		ps := statsapi.PodStats{
			PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime: metav1.NewTime(time.Unix(0, sb.CreatedAt)),
		}
		pod := specs[types.UID(md.GetUid())]
		var cpuSum, wsSum, usageSum uint64
		var haveCPU, haveMem bool
		var ephemeral uint64
		for _, c := range bySandbox[sb.Id] {
			name := c.GetLabels()[labelContainer]
			if name == "" {
				name = c.GetMetadata().GetName()
			}
			cst := statsapi.ContainerStats{Name: name, StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
			s := byID[c.Id]
			cpu, mem := s.GetCpu(), s.GetMemory()
			if cpu.GetUsageCoreNanoSeconds() == nil || mem.GetWorkingSetBytes() == nil {
				// The runtime gave no figures: the container's cgroup files.
				if u, err := p.containerCgroup(ctx, c.Id); err == nil {
					cpu = &runtimeapi.CpuUsage{Timestamp: now.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: u.cpu}}
					mem = &runtimeapi.MemoryUsage{Timestamp: now.UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: u.workingSet}, UsageBytes: &runtimeapi.UInt64Value{Value: u.usage}}
				}
			}
			if v := cpu.GetUsageCoreNanoSeconds(); v != nil {
				ts := timeOr(cpu.GetTimestamp(), now)
				cst.CPU = &statsapi.CPUStats{Time: metav1.NewTime(ts), UsageCoreNanoSeconds: ptrU(v.Value), UsageNanoCores: p.rates.nanoCores(c.Id, ts, v.Value)}
				cpuSum += v.Value
				haveCPU = true
			}
			if v := mem.GetWorkingSetBytes(); v != nil {
				ms := &statsapi.MemoryStats{Time: metav1.NewTime(timeOr(mem.GetTimestamp(), now)), WorkingSetBytes: ptrU(v.Value)}
				if u := mem.GetUsageBytes(); u != nil {
					ms.UsageBytes = ptrU(u.Value)
					usageSum += u.Value
				}
				if u := mem.GetRssBytes(); u != nil {
					ms.RSSBytes = ptrU(u.Value)
				}
				if u := mem.GetPageFaults(); u != nil {
					ms.PageFaults = ptrU(u.Value)
				}
				if u := mem.GetMajorPageFaults(); u != nil {
					ms.MajorPageFaults = ptrU(u.Value)
				}
				if limit := memoryLimit(pod, name); limit > 0 && limit >= v.Value {
					ms.AvailableBytes = ptrU(limit - v.Value)
				}
				cst.Memory = ms
				wsSum += v.Value
				haveMem = true
			}
			if !cpuAndMemoryOnly {
				rootfs := &statsapi.FsStats{Time: t}
				if imgFs != nil {
					rootfs.CapacityBytes, rootfs.AvailableBytes, rootfs.Inodes, rootfs.InodesFree = imgFs.CapacityBytes, imgFs.AvailableBytes, imgFs.Inodes, imgFs.InodesFree
				}
				wl := s.GetWritableLayer()
				rootfs.UsedBytes = ptrU(wl.GetUsedBytes().GetValue())
				rootfs.InodesUsed = ptrU(wl.GetInodesUsed().GetValue())
				cst.Rootfs = rootfs
				logs := &statsapi.FsStats{Time: t}
				if logFs != nil {
					logs.CapacityBytes, logs.AvailableBytes, logs.Inodes, logs.InodesFree = logFs.CapacityBytes, logFs.AvailableBytes, logFs.Inodes, logFs.InodesFree
				}
				used, inodes := du(filepath.Join(p.opts.LogDir, md.GetNamespace()+"_"+md.GetName()+"_"+md.GetUid(), name))
				logs.UsedBytes, logs.InodesUsed = &used, &inodes
				cst.Logs = logs
				ephemeral += *rootfs.UsedBytes + used
			}
			ps.Containers = append(ps.Containers, cst)
		}
		if haveCPU {
			ps.CPU = &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: ptrU(cpuSum), UsageNanoCores: p.rates.nanoCores("pod/"+md.GetUid(), now, cpuSum)}
		}
		if haveMem {
			ps.Memory = &statsapi.MemoryStats{Time: t, WorkingSetBytes: ptrU(wsSum)}
			if usageSum > 0 {
				ps.Memory.UsageBytes = ptrU(usageSum)
			}
		}
		if !cpuAndMemoryOnly {
			if pid := p.sandboxPid(ctx, sb.Id); pid > 0 {
				ps.Network = host{proc: p.opts.ProcDir}.network(t, fmt.Sprintf("%d", pid))
			}
			ps.VolumeStats = append(p.volumeStats(pod, t), p.claimVolumes(ctx, pod, bySandbox[sb.Id], t)...)
			for _, v := range ps.VolumeStats {
				if ephemeralVolume(pod, v.Name) && v.UsedBytes != nil {
					ephemeral += *v.UsedBytes
				}
			}
			eph := &statsapi.FsStats{Time: t, UsedBytes: ptrU(ephemeral)}
			if fs, err := statFs(p.opts.NodeFsDir, t); err == nil {
				eph.CapacityBytes, eph.AvailableBytes, eph.Inodes, eph.InodesFree = fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree
			}
			ps.EphemeralStorage = eph
		}
		out = append(out, ps)
	}
	running := map[string]bool{}
	for _, c := range cs {
		running[c.Id] = true
	}
	p.mu.Lock()
	for id := range p.pids {
		if !live[id] {
			delete(p.pids, id)
		}
	}
	for id := range p.mounts {
		if !running[id] {
			delete(p.mounts, id)
		}
	}
	if !cpuAndMemoryOnly {
		p.forgetClaimsBefore(now.Add(-2 * claimStatsPeriod))
	}
	p.mu.Unlock()
	return out, nil
}

// volumeStats measures the pod's volumes that live in its directory (emptyDir on disk,
// configMap, secret, downwardAPI, projected); claimVolumes its persistentVolumeClaims.
func (p *Provider) volumeStats(pod *corev1.Pod, t metav1.Time) []statsapi.VolumeStats {
	if pod == nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for _, v := range pod.Spec.Volumes {
		if !ephemeralVolume(pod, v.Name) {
			continue
		}
		dir := filepath.Join(p.opts.RootDir, "pods", string(pod.UID), "volumes", v.Name)
		fs, err := statFs(dir, t)
		if err != nil {
			continue
		}
		used, inodes := du(dir)
		fs.UsedBytes, fs.InodesUsed = &used, &inodes
		out = append(out, statsapi.VolumeStats{Name: v.Name, FsStats: *fs})
	}
	return out
}

// ephemeralVolume reports whether pod's volume name is local ephemeral storage: the
// kubelet's emptyDir (not Memory medium), configMap, secret, downwardAPI and projected.
func ephemeralVolume(pod *corev1.Pod, name string) bool {
	if pod == nil {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.EmptyDir != nil:
			return v.EmptyDir.Medium != corev1.StorageMediumMemory
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			return true
		}
	}
	return false
}

// memoryLimit is the memory limit of pod's container name in bytes (0: none).
func memoryLimit(pod *corev1.Pod, name string) uint64 {
	if pod == nil {
		return 0
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == name {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Sign() > 0 {
				return uint64(q.Value())
			}
		}
	}
	return 0
}

// sandboxPid is the pid of the sandbox's pause process (containerd's verbose status).
func (p *Provider) sandboxPid(ctx context.Context, id string) int {
	p.mu.Lock()
	pid, ok := p.pids[id]
	p.mu.Unlock()
	if ok {
		return pid
	}
	st, err := p.opts.Runtime.PodSandboxStatus(ctx, id, true)
	if err != nil {
		return 0
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if raw, ok := st.GetInfo()["info"]; ok {
		_ = json.Unmarshal([]byte(raw), &info)
	}
	p.mu.Lock()
	p.pids[id] = info.Pid
	p.mu.Unlock()
	return info.Pid
}

// containerCgroup reads container id's usage from its cgroup, found through the pid of
// its process (containerd's verbose status).
func (p *Provider) containerCgroup(ctx context.Context, id string) (cgroupUsage, error) {
	st, err := p.opts.Runtime.ContainerStatus(ctx, id, true)
	if err != nil {
		return cgroupUsage{}, err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if raw, ok := st.GetInfo()["info"]; ok {
		_ = json.Unmarshal([]byte(raw), &info)
	}
	if info.Pid <= 0 {
		return cgroupUsage{}, fmt.Errorf("container %s: no pid", id)
	}
	return readCgroup(p.opts.ProcDir, info.Pid, "/sys/fs/cgroup")
}

func timeOr(ns int64, now time.Time) time.Time {
	if ns <= 0 {
		return now
	}
	return time.Unix(0, ns)
}

func ptrU(v uint64) *uint64 { return &v }

// sample is a cumulative CPU reading.
type sample struct {
	at time.Time
	ns uint64
}

// rates turns cumulative CPU readings into nano-cores against the previous reading of the
// same key at least a second older.
type rates struct {
	mu   sync.Mutex
	last map[string]sample
}

func (r *rates) nanoCores(key string, at time.Time, ns uint64) *uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.last[key]
	if !ok || at.Sub(prev.at) >= time.Second {
		r.last[key] = sample{at: at, ns: ns}
	}
	if !ok {
		return nil
	}
	return nanoCores(prev, sample{at: at, ns: ns})
}

// nanoCores is the CPU rate between two readings (nil when it cannot be computed). Pure.
func nanoCores(prev, cur sample) *uint64 {
	dt := cur.at.Sub(prev.at)
	if dt <= 0 || cur.ns < prev.ns {
		return nil
	}
	v := uint64(float64(cur.ns-prev.ns) / dt.Seconds())
	return &v
}

func (r *rates) forgetBefore(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, s := range r.last {
		if s.at.Before(t) {
			delete(r.last, k)
		}
	}
}
