package simnode

import (
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// KubeletVersion is what simulated nodes report as their kubelet's version.
const KubeletVersion = "v1.37.2"

// nodeState is a simulated node: its identity, addresses, pod range and the two tasks of
// its heartbeat.
type nodeState struct {
	name, zone string
	ip         uint32
	pods       podRange
	ownRange   bool // pods is the simulator's own range, not spec.podCIDR
	lease      *coordinationv1.Lease
	uid        types.UID // the Node's, once registered
	registered bool
	stopped    bool // HeartbeatAnnotation is "stopped"
	leaseTask  task
	statusTask task
}

// nodeObject is the Node a simulated node registers, as a kubelet does: labels, the
// simulated markers, addresses, capacity, conditions and node info.
func (o *Options) nodeObject(n *nodeState, now metav1.Time) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(o.CPU),
		corev1.ResourceMemory:           resource.MustParse(o.Memory),
		corev1.ResourcePods:             *resource.NewQuantity(int64(o.Pods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{
				corev1.LabelHostname:      n.name,
				corev1.LabelOSStable:      "linux",
				corev1.LabelArchStable:    "amd64",
				corev1.LabelTopologyZone:  n.zone,
				TypeLabel:                 TypeValue,
				"kubeos.dev/sim-node-set": trimPrefix(o.Prefix),
			},
			Annotations: map[string]string{NodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0",
				PodCIDRAnnotation: ipString(n.pods.base) + "/24"}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(),
			Conditions: nodeConditions(now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ipString(n.ip)},
				{Type: corev1.NodeHostName, Address: n.name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032x", n.ip), SystemUUID: fmt.Sprintf("%032x", n.ip), BootID: fmt.Sprintf("%032x", n.ip),
				KernelVersion: "simulated", OSImage: "Kube simulated node", ContainerRuntimeVersion: "sim://" + KubeletVersion,
				KubeletVersion: KubeletVersion, OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
}

// trimPrefix makes a label value of a name prefix ("sim-" → "sim").
func trimPrefix(p string) string {
	for len(p) > 0 && !isAlnum(p[len(p)-1]) {
		p = p[:len(p)-1]
	}
	for len(p) > 0 && !isAlnum(p[0]) {
		p = p[1:]
	}
	if len(p) > 63 {
		p = p[:63]
	}
	return p
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// nodeConditions are a healthy kubelet's, heartbeat now.
func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// heartbeatPatch is the strategic-merge patch of nodes/status a kubelet's periodic report
// amounts to when nothing changed: every condition's lastHeartbeatTime (conditions merge
// by type, so their transition times stay). Ready is asserted True again, as a kubelet
// that is up posts it after a NotReady someone else wrote.
func heartbeatPatch(now metav1.Time) []byte {
	ts := strconv.Quote(now.UTC().Format("2006-01-02T15:04:05Z"))
	return []byte(`{"status":{"conditions":[` +
		`{"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory","message":"kubelet has sufficient memory available","lastHeartbeatTime":` + ts + `},` +
		`{"type":"DiskPressure","status":"False","reason":"KubeletHasNoDiskPressure","message":"kubelet has no disk pressure","lastHeartbeatTime":` + ts + `},` +
		`{"type":"PIDPressure","status":"False","reason":"KubeletHasSufficientPID","message":"kubelet has sufficient PID available","lastHeartbeatTime":` + ts + `},` +
		`{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":` + ts + `}]}}`)
}

// leaseObject is a node's Lease in kube-node-lease, owned by its Node as the kubelet's.
func (o *Options) leaseObject(node string, uid types.UID, now metav1.MicroTime) *coordinationv1.Lease {
	d := int32(o.LeaseDuration.Seconds())
	holder := node
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now},
	}
	if uid != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: uid}}
	}
	return l
}
