package simnode

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
)

func nodeName(i int) string { return fmt.Sprintf("%s%d", simnode.DefaultPrefix, i) }

// readyNodes waits until all simulated nodes are registered and Ready.
func readyNodes(t *testing.T, cs kubernetes.Interface) []corev1.Node {
	t.Helper()
	var list *corev1.NodeList
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		var err error
		list, err = cs.CoreV1().Nodes().List(ctxT(t), metav1.ListOptions{LabelSelector: simnode.TypeLabel + "=" + simnode.TypeValue})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != nodes {
			return fmt.Errorf("%d of %d simulated nodes Ready (%d listed)", ready, nodes, len(list.Items))
		}
		return nil
	})
	return list.Items
}

func TestNodesRegisterReady(t *testing.T) {
	cs := clientset(t)
	zones := map[string]int{}
	for _, n := range readyNodes(t, cs) {
		if n.Labels[corev1.LabelHostname] != n.Name || n.Labels[corev1.LabelOSStable] != "linux" || n.Labels[corev1.LabelArchStable] == "" {
			t.Errorf("node %s labels %v", n.Name, n.Labels)
		}
		if n.Annotations[simnode.NodeAnnotation] != "fake" {
			t.Errorf("node %s not marked simulated: %v", n.Name, n.Annotations)
		}
		zones[n.Labels[corev1.LabelTopologyZone]]++
		cpu, mem, pods := n.Status.Allocatable[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceMemory], n.Status.Capacity[corev1.ResourcePods]
		if cpu.String() != "32" || mem.String() != "256Gi" || pods.String() != "110" {
			t.Errorf("node %s capacity cpu %s memory %s pods %s", n.Name, cpu.String(), mem.String(), pods.String())
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Type != corev1.NodeInternalIP {
			t.Errorf("node %s addresses %v", n.Name, n.Status.Addresses)
		}
		if n.Status.NodeInfo.KubeletVersion == "" || n.Status.NodeInfo.OperatingSystem != "linux" {
			t.Errorf("node %s nodeInfo %+v", n.Name, n.Status.NodeInfo)
		}
		// The Node was created by the node itself (NodeRestriction lets a node create only
		// itself), not by a controller identity.
	}
	if len(zones) != 3 {
		t.Errorf("nodes spread over zones %v, want 3 zones", zones)
	}
}

// leaseRenewTime is node's Lease renewTime, zero when it has none yet.
func leaseRenewTime(t *testing.T, cs kubernetes.Interface, node string) (time.Time, *metav1.OwnerReference, error) {
	l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctxT(t), node, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, nil, err
	}
	if l.Spec.RenewTime == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != node {
		return time.Time{}, nil, fmt.Errorf("lease %s: holder %v renewTime %v", node, l.Spec.HolderIdentity, l.Spec.RenewTime)
	}
	var owner *metav1.OwnerReference
	if len(l.OwnerReferences) > 0 {
		owner = &l.OwnerReferences[0]
	}
	return l.Spec.RenewTime.Time, owner, nil
}

// waitRenewed waits until node's Lease renewTime is after since, and returns it.
func waitRenewed(t *testing.T, cs kubernetes.Interface, node string, since time.Time) time.Time {
	t.Helper()
	var got time.Time
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		rt, _, err := leaseRenewTime(t, cs, node)
		if err != nil {
			return err
		}
		if !rt.After(since) {
			return fmt.Errorf("lease %s renewed at %s, not after %s", node, rt, since)
		}
		got = rt
		return nil
	})
	return got
}

func TestLeasesRenew(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	for i := 1; i <= nodes; i++ {
		first := waitRenewed(t, cs, nodeName(i), time.Time{})
		_, owner, err := leaseRenewTime(t, cs, nodeName(i))
		if err != nil {
			t.Fatal(err)
		}
		if owner == nil || owner.Kind != "Node" || owner.Name != nodeName(i) {
			t.Errorf("lease %s owner %+v, want its Node", nodeName(i), owner)
		}
		waitRenewed(t, cs, nodeName(i), first)
	}
}

// TestNodeStopsHeartbeating: a node annotated heartbeat=stopped renews its Lease no more
// while the others go on; removing the annotation resumes it.
func TestNodeStopsHeartbeating(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	const silent, other = 5, 4
	waitRenewed(t, cs, nodeName(silent), time.Time{})
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"stopped"}}}`, simnode.HeartbeatAnnotation)
	if _, err := cs.CoreV1().Nodes().Patch(ctxT(t), nodeName(silent), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.CoreV1().Nodes().Patch(ctxT(t), nodeName(silent), types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, simnode.HeartbeatAnnotation)), metav1.PatchOptions{})
	})
	// A renewal may have been in flight when the annotation came: let the other node
	// renew once, then take the silent node's last renewal as the baseline.
	o := waitRenewed(t, cs, nodeName(other), time.Now())
	base, _, err := leaseRenewTime(t, cs, nodeName(silent))
	if err != nil {
		t.Fatal(err)
	}
	// Three more renewals of the other node (three renew intervals): none of the silent one.
	for range 3 {
		o = waitRenewed(t, cs, nodeName(other), o)
	}
	rt, _, err := leaseRenewTime(t, cs, nodeName(silent))
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Equal(base) {
		t.Fatalf("stopped node's lease renewed at %s after %s", rt, base)
	}
	// The node lifecycle controller sees no heartbeat: the node goes NotReady (Unknown).
	servertest.Eventually(t, 90*time.Second, 250*time.Millisecond, func() error {
		if c := readyCondition(t, cs, nodeName(silent)); c.Status == corev1.ConditionTrue {
			return fmt.Errorf("silent node still Ready: %+v", c)
		}
		return nil
	})
	t.Logf("silent node: %+v", readyCondition(t, cs, nodeName(silent)))
	if _, err := cs.CoreV1().Nodes().Patch(ctxT(t), nodeName(silent), types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, simnode.HeartbeatAnnotation)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRenewed(t, cs, nodeName(silent), base)
	// Heartbeating again, it reports Ready again, as a kubelet's next status update does.
	servertest.Eventually(t, 60*time.Second, 250*time.Millisecond, func() error {
		if c := readyCondition(t, cs, nodeName(silent)); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("node not Ready again: %+v", c)
		}
		return nil
	})
}

func readyCondition(t *testing.T, cs kubernetes.Interface, node string) corev1.NodeCondition {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctxT(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}
