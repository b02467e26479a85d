package agent

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/apimachinery/lease"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/agent/eviction"
)

// KubeletVersion is the version the agent reports in nodeInfo (the API it implements).
const KubeletVersion = "v1.37.2"

// machine is what the node reports about the machine. Read once.
type machine struct {
	capacity corev1.ResourceList
	info     corev1.NodeSystemInfo
}

func readFirst(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readMachine(dataDir string, maxPods int) machine {
	mem := int64(0)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				fmt.Sscan(f[1], &mem)
				mem *= 1024
			}
		}
	}
	var fs syscall.Statfs_t
	disk := int64(0)
	if syscall.Statfs(dataDir, &fs) == nil {
		disk = int64(fs.Blocks) * fs.Bsize
	}
	var uts syscall.Utsname
	_ = syscall.Uname(&uts)
	kernel := charsToString(uts.Release[:])
	osImage := "Linux"
	for _, l := range strings.Split(readFirst("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			osImage = strings.Trim(v, `"`)
		}
	}
	return machine{
		capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(disk, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		},
		info: corev1.NodeSystemInfo{
			MachineID:       readFirst("/etc/machine-id"),
			SystemUUID:      readFirst("/sys/class/dmi/id/product_uuid"),
			BootID:          readFirst("/proc/sys/kernel/random/boot_id"),
			KernelVersion:   kernel,
			OSImage:         osImage,
			KubeletVersion:  KubeletVersion,
			OperatingSystem: goruntime.GOOS,
			Architecture:    goruntime.GOARCH,
		},
	}
}

func charsToString(c []int8) string {
	b := make([]byte, 0, len(c))
	for _, x := range c {
		if x == 0 {
			break
		}
		b = append(b, byte(x))
	}
	return string(b)
}

// allocatable is capacity minus the reserved amounts (never below zero). Pure.
func allocatable(capacity corev1.ResourceList, reserved ...corev1.ResourceList) corev1.ResourceList {
	out := capacity.DeepCopy()
	for _, r := range reserved {
		for k, v := range r {
			q, ok := out[k]
			if !ok {
				continue
			}
			q.Sub(v)
			if q.Sign() < 0 {
				q = *resource.NewQuantity(0, q.Format)
			}
			out[k] = q
		}
	}
	return out
}

// health is what the node's conditions say besides the runtime: the eviction manager's
// pressure, and a graceful shutdown under way.
type health struct {
	pressure     eviction.Pressure
	shuttingDown bool
}

// nodeConditions are the node's conditions from the runtime's status and h, transition
// times kept from old while a condition stays. Pure.
func nodeConditions(old []corev1.NodeCondition, runtimeErr error, st *runtimeapi.RuntimeStatus, h health, now metav1.Time) []corev1.NodeCondition {
	ready, reason, msg := true, "KubeletReady", "kubelet is posting ready status"
	if h.shuttingDown {
		ready, reason, msg = false, "KubeletNotReady", shutdownNotReady
	} else if runtimeErr != nil {
		ready, reason, msg = false, "KubeletNotReady", "container runtime is down: "+runtimeErr.Error()
	} else {
		for _, c := range st.GetConditions() {
			if !c.Status && (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) {
				ready, reason = false, "KubeletNotReady"
				msg = fmt.Sprintf("container runtime %s is false: %s: %s", strings.ToLower(c.Type), c.Reason, c.Message)
			}
		}
	}
	mk := func(t corev1.NodeConditionType, s bool, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		if s {
			c.Status = corev1.ConditionTrue
		}
		for _, o := range old {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	memory := mk(corev1.NodeMemoryPressure, false, "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
	if h.pressure.Memory {
		memory = mk(corev1.NodeMemoryPressure, true, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available")
	}
	disk := mk(corev1.NodeDiskPressure, false, "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	if h.pressure.Disk {
		disk = mk(corev1.NodeDiskPressure, true, "KubeletHasDiskPressure", "kubelet has disk pressure")
	}
	return []corev1.NodeCondition{
		memory,
		disk,
		mk(corev1.NodePIDPressure, false, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		mk(corev1.NodeReady, ready, reason, msg),
	}
}

// register creates the Node (or takes over an existing one with the same name).
func (a *Agent) register(ctx context.Context) (*corev1.Node, error) {
	nodes := a.client.CoreV1().Nodes()
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName, Labels: map[string]string{
		corev1.LabelHostname: a.opts.NodeName, corev1.LabelOSStable: goruntime.GOOS, corev1.LabelArchStable: goruntime.GOARCH,
		"beta.kubernetes.io/os": goruntime.GOOS, "beta.kubernetes.io/arch": goruntime.GOARCH,
	}}}
	if a.opts.PodCIDR != "" {
		want.Spec.PodCIDR, want.Spec.PodCIDRs = a.opts.PodCIDR, []string{a.opts.PodCIDR}
	}
	var node *corev1.Node
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := nodes.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			n, err = nodes.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
		}
		if err != nil {
			a.log.Warn("register node", "err", err)
			return false, nil
		}
		node = n
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("node registered", "node", node.Name, "podCIDR", node.Spec.PodCIDR)
	return node, nil
}

// nodeStatus is the status the agent reports now.
func (a *Agent) nodeStatus(ctx context.Context, old corev1.NodeStatus) corev1.NodeStatus {
	st, err := a.cri.Runtime.Status(ctx, false)
	var rs *runtimeapi.RuntimeStatus
	if err == nil {
		rs = st.GetStatus()
	}
	version := ""
	if v, verr := a.cri.Runtime.Version(ctx, "v1"); verr == nil {
		version = v.RuntimeName + "://" + v.RuntimeVersion
	}
	info := a.machine.info
	info.ContainerRuntimeVersion = version
	out := corev1.NodeStatus{
		Capacity:        a.machine.capacity,
		Allocatable:     a.allocatable,
		Conditions:      append(nodeConditions(old.Conditions, err, rs, a.health(), metav1.Now()), a.serviceConditions(old.Conditions, metav1.Now())...),
		Addresses:       a.addresses(),
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(a.port)}},
		NodeInfo:        info,
		Images:          old.Images,
	}
	return out
}

func (a *Agent) addresses() []corev1.NodeAddress {
	var out []corev1.NodeAddress
	if a.nodeIP != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.nodeIP})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: a.opts.NodeName})
}

// statusChanged reports whether b differs from a other than in heartbeat times. Pure.
func statusChanged(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// health is the node's pressure and shutdown state now.
func (a *Agent) health() health {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := health{shuttingDown: a.shuttingDown}
	if a.evictions != nil {
		h.pressure = a.evictions.Pressure()
	}
	return h
}

// writeStatus writes the node's status when it changed, and at least every minute
// (upstream's nodeStatusReportFrequency is 5 min; the heartbeat is the Lease).
func (a *Agent) writeStatus(ctx context.Context) {
	node, err := a.client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = a.register(ctx)
	} else if err == nil {
		a.setPodCIDR(node.Spec.PodCIDR)
		st := a.nodeStatus(ctx, node.Status)
		a.mu.Lock()
		due := time.Since(a.lastStatusWrite) > time.Minute
		a.mu.Unlock()
		if statusChanged(node.Status, st) || due {
			node.Status = st
			if _, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err == nil {
				a.mu.Lock()
				a.lastStatusWrite = time.Now()
				a.mu.Unlock()
			}
		}
	}
	if err != nil && ctx.Err() == nil {
		a.log.Warn("node status", "err", err)
	}
}

// reportStatus writes the node's status every 10 s, and at once when asked (statusNow).
func (a *Agent) reportStatus(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		a.writeStatus(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-a.statusNow:
		}
	}
}

// runLease heartbeats the node's Lease in kube-node-lease every 10 s (upstream's
// controller, the kubelet's settings: 40 s duration, owned by the Node).
func (a *Agent) runLease(ctx context.Context) {
	c := lease.NewController(clock.RealClock{}, a.client, a.opts.NodeName, 40, nil, 10*time.Second,
		a.opts.NodeName, corev1.NamespaceNodeLease, func(l *coordinationv1.Lease) error {
			if len(l.OwnerReferences) > 0 {
				return nil
			}
			node, err := a.client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(false)}}
			return nil
		})
	c.Run(ctx)
}
