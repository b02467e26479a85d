// Command crifloor measures the runtime's floor under pod startup: what containerd 1.6 +
// runc + the CNI plugins take to run a pod when nothing but a CRI client drives them. It
// starts a containerd exactly as `kube agent` does (internal/agent/runtime: the same
// configuration, the agent's pause image, the same CNI conflist from internal/agent/cni,
// pods in a QoS cgroup hierarchy of internal/agent/cgroups under a root of its own), then
// for N pods at once and N one after another runs, per pod:
//
//	cgroup    the pod's cgroup (the agent's Hierarchy.EnsurePod)
//	sandbox   RunPodSandbox (runc create/start of pause, CNI bridge + host-local + portmap)
//	create    CreateContainer (busybox `sleep`)
//	start     StartContainer
//
// and prints p50/p99 of each step and of the whole (the floor: a node agent cannot start a
// pod faster than this on this runtime). It also asks whether the runtime serves CRI
// container events (GetContainerEvents), the kubelet's evented PLEG.
//
//	go build -o /tmp/crifloor ./bench/agent/crifloor
//	flock /tmp/kube-bench.lock /tmp/crifloor -busybox /tmp/busybox-k8slocal.tar
//
// Must run as root. Everything it makes (data dir, bridge, cgroup root) is removed at the end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"kubeos.dev/kube/internal/agent/cgroups"
	"kubeos.dev/kube/internal/agent/cni"
	"kubeos.dev/kube/internal/agent/images"
	agentruntime "kubeos.dev/kube/internal/agent/runtime"
)

var (
	busybox = flag.String("busybox", "/tmp/busybox-k8slocal.tar", "busybox image archive (k8s.local/busybox:1.35)")
	n       = flag.Int("n", 30, "pods per run")
	bridge  = flag.String("bridge", "kbfloor0", "CNI bridge name")
	podCIDR = flag.String("pod-cidr", "10.237.0.0/24", "pod CIDR of the bridge")
	cgRoot  = flag.String("cgroup-root", "/crifloor", "parent of the kubepods cgroup")
	keep    = flag.Bool("keep", false, "keep the data directory")
	runs    = flag.String("runs", "batch,serial", "which runs, in order")
	portmap = flag.Bool("portmap", true, "keep the portmap plugin in the conflist (the agent's; the kubelet peer's has none)")
)

const image = "k8s.local/busybox:1.35"

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crifloor:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "kube-crifloor-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	layout := agentruntime.Layout{Dir: filepath.Join(dir, "containerd")}
	ctrd := &agentruntime.Containerd{Layout: layout, Proxy: "http://127.0.0.1:9", Log: log,
		Config: agentruntime.ConfigOptions{SandboxImage: images.PauseRef, CNIBinDir: "/usr/lib/cni"}}
	var wg sync.WaitGroup
	if err := ctrd.Start(ctx, &wg); err != nil {
		return err
	}
	defer func() { cancel(); wg.Wait() }()
	prefix := netip.MustParsePrefix(*podCIDR)
	network := cni.Network{Name: "kube-" + *bridge, Bridge: *bridge, PodCIDR: prefix,
		IPAMDir: filepath.Join(dir, "cni", "ipam"), Routes: []netip.Prefix{prefix}}
	if err := cni.Write(layout.CNIConfDir(), network); err != nil {
		return err
	}
	if !*portmap {
		if err := withoutPortmap(layout.CNIConfDir(), network); err != nil {
			return err
		}
	}
	defer cni.DeleteBridge(context.Background(), *bridge)
	pause := filepath.Join(dir, "pause.tar")
	if err := images.WritePause(pause); err != nil {
		return err
	}
	for _, f := range []string{pause, *busybox} {
		if err := images.Import(ctx, layout.Socket(), f); err != nil {
			return err
		}
	}
	// The kubelet's --runtime-request-timeout (2 min): a loaded machine's batch of sandboxes
	// can take longer than the 10 s default of cri-client's callers.
	rs, err := remote.NewRemoteRuntimeService(ctx, layout.Endpoint(), 2*time.Minute, nil, false)
	if err != nil {
		return err
	}
	hier, err := cgroups.New("", *cgRoot)
	if err != nil {
		return err
	}
	if err := hier.EnsureNode(corev1.ResourceList{}); err != nil {
		return err
	}
	defer func() { _ = hier.Remove() }()
	v, _ := rs.Version(ctx, "v1")
	fmt.Printf("runtime %s %s, CRI %s; work dir %s\n", v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion(), dir)
	fmt.Printf("GetContainerEvents: %s\n", containerEvents(ctx, rs))

	f := &floor{rs: rs, hier: hier, logDir: filepath.Join(dir, "logs")}
	// Before containerd stops (deferred earlier, so run later): nothing of ours outlives us.
	defer func() { _ = f.removeAll(context.Background()) }()
	// Warm-up: the first pod pays one-time costs (bridge creation, image unpack).
	if _, err := f.runPods(ctx, "warm", 1, false); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := f.removeAll(ctx); err != nil {
		return err
	}
	for _, r := range strings.Split(*runs, ",") {
		serial := r == "serial"
		if r != "batch" && r != "serial" {
			return fmt.Errorf("unknown run %q", r)
		}
		load0 := loadavg()
		t0 := time.Now()
		res, err := f.runPods(ctx, r, *n, serial)
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		fmt.Printf("\n%s of %d (%s wall; load %s → %s)\n", r, *n, time.Since(t0).Round(time.Millisecond), load0, loadavg())
		report(res)
		if err := f.removeAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// withoutPortmap rewrites n's conflist in confDir without the portmap plugin.
func withoutPortmap(confDir string, n cni.Network) error {
	b, err := cni.ConfList(n)
	if err != nil {
		return err
	}
	var conf map[string]any
	if err := json.Unmarshal(b, &conf); err != nil {
		return err
	}
	plugins := conf["plugins"].([]any)
	conf["plugins"] = plugins[:1]
	out, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-"+n.Name+".conflist"), out, 0o644)
}

// containerEvents says whether the runtime serves CRI container events.
func containerEvents(ctx context.Context, rs internalapi.RuntimeService) string {
	ectx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 1)
	err := rs.GetContainerEvents(ectx, ch, nil)
	switch {
	case err == nil, errors.Is(ectx.Err(), context.DeadlineExceeded) && strings.Contains(fmt.Sprint(err), "DeadlineExceeded"):
		return "served (stream open)"
	default:
		return "not served: " + err.Error()
	}
}

type floor struct {
	rs     internalapi.RuntimeService
	hier   *cgroups.Hierarchy
	logDir string

	mu        sync.Mutex
	sandboxes []string
}

// steps are one pod's timings.
type steps struct {
	cgroup, sandbox, create, start, total time.Duration
}

func (f *floor) runPods(ctx context.Context, prefix string, count int, serial bool) ([]steps, error) {
	out := make([]steps, count)
	errs := make([]error, count)
	one := func(i int) {
		out[i], errs[i] = f.startPod(ctx, fmt.Sprintf("%s-%d", prefix, i))
	}
	if serial {
		for i := range count {
			one(i)
		}
	} else {
		var wg sync.WaitGroup
		for i := range count {
			wg.Add(1)
			go func() { defer wg.Done(); one(i) }()
		}
		wg.Wait()
	}
	return out, errors.Join(errs...)
}

// startPod runs one pod the way the agent does (cgroup, sandbox, container) and times each
// step.
func (f *floor) startPod(ctx context.Context, name string) (steps, error) {
	var s steps
	uid := types.UID(fmt.Sprintf("crifloor-%s-%d", name, time.Now().UnixNano()))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "floor", UID: uid}}
	t0 := time.Now()
	parent, err := f.hier.EnsurePod(pod)
	if err != nil {
		return s, err
	}
	t1 := time.Now()
	logDir := filepath.Join(f.logDir, string(uid))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return s, err
	}
	labels := map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "floor", "io.kubernetes.pod.uid": string(uid)}
	sb := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "floor", Uid: string(uid)},
		Hostname:     name,
		LogDirectory: logDir,
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}},
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: parent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}},
		},
	}
	id, err := f.rs.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return s, fmt.Errorf("run sandbox: %w", err)
	}
	f.mu.Lock()
	f.sandboxes = append(f.sandboxes, id)
	f.mu.Unlock()
	t2 := time.Now()
	c := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image},
		Command:  []string{"sleep", "100000"},
		Labels:   labels,
		LogPath:  "c/0.log",
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}},
		},
	}
	cid, err := f.rs.CreateContainer(ctx, id, c, sb)
	if err != nil {
		return s, fmt.Errorf("create container: %w", err)
	}
	t3 := time.Now()
	if err := f.rs.StartContainer(ctx, cid); err != nil {
		return s, fmt.Errorf("start container: %w", err)
	}
	t4 := time.Now()
	return steps{cgroup: t1.Sub(t0), sandbox: t2.Sub(t1), create: t3.Sub(t2), start: t4.Sub(t3), total: t4.Sub(t0)}, nil
}

// removeAll stops and removes every sandbox made so far, and their pods' cgroups.
func (f *floor) removeAll(ctx context.Context) error {
	f.mu.Lock()
	ids := f.sandboxes
	f.sandboxes = nil
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, _ := f.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id})
			for _, c := range cs {
				_ = f.rs.StopContainer(ctx, c.Id, 0)
			}
			_ = f.rs.StopPodSandbox(ctx, id)
			_ = f.rs.RemovePodSandbox(ctx, id)
		}()
	}
	wg.Wait()
	for _, uid := range f.hier.PodUIDs() {
		_ = f.hier.RemovePod(uid)
	}
	return nil
}

func report(res []steps) {
	cols := []struct {
		name string
		get  func(steps) time.Duration
	}{
		{"cgroup", func(s steps) time.Duration { return s.cgroup }},
		{"RunPodSandbox", func(s steps) time.Duration { return s.sandbox }},
		{"CreateContainer", func(s steps) time.Duration { return s.create }},
		{"StartContainer", func(s steps) time.Duration { return s.start }},
		{"total", func(s steps) time.Duration { return s.total }},
	}
	fmt.Printf("%-16s %10s %10s %10s\n", "step", "p50", "p99", "mean")
	for _, c := range cols {
		ds := make([]time.Duration, len(res))
		var sum time.Duration
		for i, s := range res {
			ds[i] = c.get(s)
			sum += ds[i]
		}
		fmt.Printf("%-16s %10s %10s %10s\n", c.name, pct(ds, 0.5), pct(ds, 0.99), (sum / time.Duration(len(ds))).Round(time.Millisecond))
	}
}

// pct is the q-quantile of d as bench/agent/compare computes it.
func pct(d []time.Duration, q float64) string {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := min(int(q*float64(len(s))), len(s)-1)
	return s[i].Round(time.Millisecond).String()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
