package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

// agentSlot is the pod CIDR and bridge of this package's extra agent process i (1 to 4):
// a /26 of 10.239.<slot>.0/24, and kube-<w..z><pid>.
func agentSlot(i int) (cidr, bridge string) {
	return fmt.Sprintf("10.239.%d.%d/26", slot.Must(), 64*(i-1)), fmt.Sprintf("kube-%c%d", 'v'+i, os.Getpid())
}

// waitNode polls node until ok.
func waitNode(t *testing.T, cs kubernetes.Interface, node string, d time.Duration, what string, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var last *corev1.Node
	servertest.Eventually(t, d, 500*time.Millisecond, func() error {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = n
		if !ok(n) {
			return fmt.Errorf("node %s not %s: conditions %+v, taints %+v", node, what, n.Status.Conditions, n.Spec.Taints)
		}
		return nil
	})
	return last
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// checkKilled checks the status the kubelet writes on a pod it killed.
func checkKilled(t *testing.T, p *corev1.Pod, reason, message string) {
	t.Helper()
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != reason || p.Status.Message != message {
		t.Errorf("pod %s: phase %s, reason %q, message %q; want Failed, %q, %q", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, reason, message)
	}
	if c := condition(p, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != corev1.PodReasonTerminationByKubelet {
		t.Errorf("pod %s: DisruptionTarget condition %+v", p.Name, c)
	}
	if c := condition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("pod %s: Ready condition %+v", p.Name, c)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			t.Errorf("pod %s: container %s not terminated: %+v", p.Name, cs.Name, cs.State)
		}
	}
}

// TestEphemeralStorageEviction: a pod writing past its emptyDir's sizeLimit, and one
// writing into its own filesystem past its container's ephemeral-storage limit, are
// evicted with the kubelet's status; a pod within its limit keeps running.
func TestEphemeralStorageEviction(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	limit := resource.MustParse("4Mi")

	overDir := busyboxPod("over-emptydir", nodeName, "dd if=/dev/zero of=/data/f bs=1M count=8; exec sleep 100000")
	overDir.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	overDir.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}

	overLimit := busyboxPod("over-limit", nodeName, "dd if=/dev/zero of=/tmp/f bs=1M count=8; exec sleep 100000")
	overLimit.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: limit}

	within := busyboxPod("within", nodeName, "dd if=/dev/zero of=/data/f bs=1M count=1; exec sleep 100000")
	within.Spec.Volumes = overDir.Spec.Volumes
	within.Spec.Containers[0].VolumeMounts = overDir.Spec.Containers[0].VolumeMounts
	within.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")}

	for _, p := range []*corev1.Pod{overDir, overLimit, within} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	failed := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed }
	got := waitPod(t, cs, ns, "over-emptydir", 90*time.Second, "Failed", failed)
	checkKilled(t, got, "Evicted", `Usage of EmptyDir volume "data" exceeds the limit "4Mi". `)
	// The writable layer's usage comes from containerd's snapshot accounting (every 10 s).
	got = waitPod(t, cs, ns, "over-limit", 90*time.Second, "Failed", failed)
	checkKilled(t, got, "Evicted", "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. ")
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "within", metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the pod within its limits: %+v %v", p.Status, err)
	}
	// The eviction is an event on the pod, as the kubelet records it.
	servertest.Eventually(t, 30*time.Second, time.Second, func() error {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=over-emptydir,reason=Evicted"})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no Evicted event")
		}
		return nil
	})
}

// TestMemoryPressureEviction: an agent whose memory.available threshold is above what
// any machine has reports MemoryPressure, the node lifecycle controller taints it
// node.kubernetes.io/memory-pressure:NoSchedule, and a pod on it is evicted with the
// kubelet's message naming memory and the threshold.
func TestMemoryPressureEviction(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	node := nodeName + "-mem"
	cidr, br := agentSlot(1)
	startAgentProcessWith(t, node, cidr, br, []string{"--kubeconfig", nodeKubeconfig(t, node)}, "--eviction-hard", "memory.available<100Ti")
	// The deadline starts once the binary is linked (minutes on a loaded machine).
	ctx := ctxT(t, 5*time.Minute)
	waitNode(t, cs, node, 2*time.Minute, "under memory pressure and tainted", func(n *corev1.Node) bool {
		pressure := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeMemoryPressure && c.Status == corev1.ConditionTrue && c.Reason == "KubeletHasInsufficientMemory" {
				pressure = true
			}
		}
		tainted := false
		for _, tn := range n.Spec.Taints {
			if tn.Key == corev1.TaintNodeMemoryPressure && tn.Effect == corev1.TaintEffectNoSchedule {
				tainted = true
			}
		}
		return pressure && tainted
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("victim", node, "exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, ns, "victim", 2*time.Minute, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	const prefix = "The node was low on resource: memory. Threshold quantity: 100Ti, available: "
	if !strings.HasPrefix(got.Status.Message, prefix) {
		t.Errorf("eviction message %q, want it to start with %q", got.Status.Message, prefix)
	}
	checkKilled(t, got, "Evicted", got.Status.Message)
}
