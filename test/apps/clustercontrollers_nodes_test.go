package apps

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

func nodeTaints(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	slices.Sort(out)
	return out
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func podReadyStatus(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

// TestNodeLifecycle: a node whose Lease is no longer renewed goes Ready=Unknown with the
// unreachable taints after the grace period, its pods go Ready=False, a pod tolerating the
// taint for a few seconds is evicted after them while one tolerating it for 300 s stays,
// and the taints go when the node heartbeats again.
func TestNodeLifecycle(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "lifecycle")
	// A healthy node in the same zone: a zone whose nodes are all down is "fully disrupted"
	// and upstream then taints nothing.
	liveNode(t, cs, "lc-healthy", nil)
	liveNode(t, cs, "lc-dying", nil)
	short := int64(3)
	quick := webPod("quick", 8080)
	quick.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &short}}
	runningPod(t, cs, ns, quick, "lc-dying", "10.250.3.1", true)
	patient := runningPod(t, cs, ns, webPod("patient", 8080), "lc-dying", "10.250.3.2", true)
	// DefaultTolerationSeconds gave the patient pod 300 s
	if !slices.ContainsFunc(patient.Spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == corev1.TaintNodeUnreachable && tl.TolerationSeconds != nil && *tl.TolerationSeconds == 300
	}) {
		t.Fatalf("pod tolerations %+v lack unreachable:NoExecute for 300s", patient.Spec.Tolerations)
	}
	t.Cleanup(func() {
		zero := int64(0)
		for _, p := range []string{"quick", "patient"} {
			_ = cs.CoreV1().Pods(ns).Delete(context.Background(), p, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})

	stopped := time.Now()
	heartbeats.set("lc-dying", false)
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "lc-dying", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := readyCondition(n)
		if c == nil || c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
			return fmt.Errorf("Ready condition %+v", c)
		}
		want := []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"}
		if got := nodeTaints(n); !slices.Equal(got, want) {
			return fmt.Errorf("taints %v, want %v", got, want)
		}
		return nil
	})
	if d := time.Since(stopped); d < monitorGrace {
		t.Errorf("node went Unknown %s after its last heartbeat, before the %s grace period", d, monitorGrace)
	}
	// the healthy node is untouched
	if n, err := cs.CoreV1().Nodes().Get(ctx, "lc-healthy", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if c := readyCondition(n); c.Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Errorf("healthy node: Ready %s, taints %v", c.Status, nodeTaints(n))
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "patient", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if podReadyStatus(p) != corev1.ConditionFalse {
			return fmt.Errorf("pod on the lost node: Ready=%s", podReadyStatus(p))
		}
		return nil
	})
	// the pod tolerating 3 s is evicted (deleted; bound to a node, it is terminating until
	// its kubelet confirms)
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "quick", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("pod quick not evicted")
		}
		return nil
	})
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=quick"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "TaintManagerEviction" }) {
		t.Errorf("no TaintManagerEviction event for the evicted pod: %+v", evs.Items)
	}
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "patient", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("pod tolerating 300 s: %v, deletionTimestamp %v", err, p.DeletionTimestamp)
	}

	// The node comes back: its kubelet posts Ready and renews its Lease.
	if _, err := postReady(ctx, cs, "lc-dying"); err != nil {
		t.Fatal(err)
	}
	heartbeats.set("lc-dying", true)
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "lc-dying", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := nodeTaints(n); len(got) != 0 {
			return fmt.Errorf("taints %v after the node returned", got)
		}
		return nil
	})
}

// TestNodeIPAM: new nodes get distinct /24 pod CIDRs of --cluster-cidr; a full range
// leaves a node without one (CIDRNotAvailable) until a deleted node's block is released.
func TestNodeIPAM(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	_, cluster, _ := net.ParseCIDR(clusterCIDR)
	podCIDR := func(name string) (string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if n.Spec.PodCIDR == "" {
			return "", fmt.Errorf("node %s has no podCIDR", name)
		}
		if len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
			return "", fmt.Errorf("node %s podCIDRs %v, podCIDR %s", name, n.Spec.PodCIDRs, n.Spec.PodCIDR)
		}
		return n.Spec.PodCIDR, nil
	}
	all, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	free := 16 - len(all.Items) // blocks of /24 in the /20
	seen := map[string]string{}
	var names []string
	for i := range free {
		name := fmt.Sprintf("ipam-%d", i)
		names = append(names, name)
		liveNode(t, cs, name, nil)
	}
	for _, name := range names {
		var c string
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() (err error) { c, err = podCIDR(name); return err })
		ip, block, err := net.ParseCIDR(c)
		if err != nil || !cluster.Contains(ip) || !strings.HasSuffix(block.String(), "/24") {
			t.Errorf("node %s podCIDR %s is not a /24 of %s", name, c, clusterCIDR)
		}
		if other, dup := seen[c]; dup {
			t.Errorf("nodes %s and %s share %s", other, name, c)
		}
		seen[c] = name
	}
	// the range is full now
	liveNode(t, cs, "ipam-extra", nil)
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=ipam-extra"})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "CIDRNotAvailable" }) {
			return fmt.Errorf("no CIDRNotAvailable event for a node beyond the range")
		}
		return nil
	})
	if _, err := podCIDR("ipam-extra"); err == nil {
		t.Fatal("a node beyond the range got a podCIDR")
	}
	// a deleted node's block is released and goes to the waiting node
	released, _ := podCIDR(names[0])
	if err := cs.CoreV1().Nodes().Delete(ctx, names[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		c, err := podCIDR("ipam-extra")
		if err != nil {
			return err
		}
		if c != released {
			return fmt.Errorf("waiting node got %s, want the released %s", c, released)
		}
		return nil
	})
	// the TTL controller annotates nodes (0 s below 100 nodes)
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "ipam-extra", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v := n.Annotations["node.alpha.kubernetes.io/ttl"]; v != "0" {
			return fmt.Errorf("ttl annotation %q", v)
		}
		return nil
	})
}

var _ kubernetes.Interface = (*kubernetes.Clientset)(nil)
