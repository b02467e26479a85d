package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

// clusterSize is the number of Node objects of the shared cluster.
const clusterSize = 50

var zones = []string{"zone-a", "zone-b", "zone-c"}

// clusterNodes is the 50-node cluster every placement test schedules onto: 4 CPU / 16 GiB
// nodes spread over three zones, and a few with the labels, taints and sizes one test
// looks for (see the comments).
func clusterNodes() []nodeSpec {
	var specs []nodeSpec
	for i := range clusterSize {
		s := nodeSpec{name: fmt.Sprintf("n-%02d", i), cpu: "4", memory: "16Gi",
			labels: map[string]string{"topology.kubernetes.io/zone": zones[i%3], "topology.kubernetes.io/region": "r1"}}
		switch i {
		case 0:
			s.labels["disk"] = "ssd" // nodeSelector
		case 1:
			s.labels["tier"] = "gold" // preferred node affinity
		case 2, 5:
			s.labels["gpu"] = "true" // required node affinity (both zone-c)
		case 3:
			s.labels["role"] = "infra" // taints and tolerations
			s.taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
		case 4, 7:
			s.labels["pair"] = "yes" // host ports
		case 8, 9, 10:
			s.labels["anti"] = "yes" // required pod anti-affinity
		case 11:
			s.labels["preempt"] = "yes" // priority preemption
			s.cpu = "2"
		case 12, 13:
			s.labels["pack"] = "yes" // the bin-packing profile
		case 14, 15:
			s.cpu = "32" // requests that fit only some nodes
		}
		specs = append(specs, s)
	}
	return specs
}

var clusterOnce sync.Once

// cluster creates the shared nodes once for the package (they stay until the server
// stops).
func cluster(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs := clientset(t)
	clusterOnce.Do(func() {
		var names []string
		for _, s := range clusterNodes() {
			createNode(t, cs, s)
			names = append(names, s.name)
		}
		startHeartbeats(cs, names)
	})
	return cs
}

func create(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctxT(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

func TestNodeSelectorAndAffinity(t *testing.T) {
	cs := cluster(t)
	ns := "affinity"
	createNamespace(t, cs, ns)

	p := pausePod(ns, "selector")
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	create(t, cs, p)
	if got := waitScheduled(t, cs, ns, "selector"); got != "n-00" {
		t.Errorf("nodeSelector disk=ssd: on %s, want n-00", got)
	}

	p = pausePod(ns, "required")
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
			{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}}}}}}}
	create(t, cs, p)
	if got := waitScheduled(t, cs, ns, "required"); got != "n-02" && got != "n-05" {
		t.Errorf("required affinity gpu=true in zone-c: on %s, want n-02 or n-05", got)
	}

	p = pausePod(ns, "preferred")
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"gold"}}}}}}}}
	create(t, cs, p)
	if got := waitScheduled(t, cs, ns, "preferred"); got != "n-01" {
		t.Errorf("preferred affinity tier=gold: on %s, want n-01", got)
	}

	// Requests that only the two 32-CPU nodes can hold.
	create(t, cs, withRequests(pausePod(ns, "large"), "30", "1Gi"))
	if got := waitScheduled(t, cs, ns, "large"); got != "n-14" && got != "n-15" {
		t.Errorf("30 CPU: on %s, want n-14 or n-15", got)
	}
}

func TestTaintsAndTolerations(t *testing.T) {
	cs := cluster(t)
	ns := "taints"
	createNamespace(t, cs, ns)

	p := pausePod(ns, "tolerates")
	p.Spec.NodeSelector = map[string]string{"role": "infra"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	create(t, cs, p)
	if got := waitScheduled(t, cs, ns, "tolerates"); got != "n-03" {
		t.Errorf("tolerating pod on %s, want n-03", got)
	}

	p = pausePod(ns, "intolerant")
	p.Spec.NodeSelector = map[string]string{"role": "infra"}
	create(t, cs, p)
	msg := waitUnschedulable(t, cs, ns, "intolerant")
	want := "0/50 nodes are available: 1 node(s) had untolerated taint(s), 49 node(s) didn't match Pod's node affinity/selector. " +
		"preemption: 0/50 nodes are available: 50 Preemption is not helpful for scheduling."
	if msg != want {
		t.Errorf("message\n got %q\nwant %q", msg, want)
	}
	// The FailedScheduling event, as kube-scheduler records it (events.k8s.io/v1,
	// reportingController default-scheduler), with the same message.
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		evs, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "intolerant" && e.Reason == "FailedScheduling" && e.Type == corev1.EventTypeWarning &&
				e.ReportingController == "default-scheduler" && e.Action == "Scheduling" && e.Note == want {
				return nil
			}
		}
		return fmt.Errorf("no FailedScheduling event among %d", len(evs.Items))
	})
	// kubectl shows both: the pod's condition and the event.
	for _, v := range []string{"1.27", "1.33"} {
		bin, err := servertest.FindKubectl(v)
		if err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		out, stderr, err := servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "get", "pod", "-n", ns, "intolerant",
			"-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}`)
		if err != nil || out != "Unschedulable: "+want {
			t.Errorf("kubectl %s get pod: %q %v %s", v, out, err, stderr)
		}
		out, stderr, err = servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "get", "events.events.k8s.io", "-n", ns)
		if err != nil || !strings.Contains(out, "FailedScheduling") || !strings.Contains(out, "1 node(s) had untolerated taint(s)") {
			t.Errorf("kubectl %s get events.events.k8s.io: %v %s\n%s", v, err, stderr, out)
		}
		out, stderr, err = servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "describe", "pod", "-n", ns, "intolerant")
		if err != nil || !strings.Contains(out, "PodScheduled   False") {
			t.Errorf("kubectl %s describe pod: %v %s\n%s", v, err, stderr, out)
		}
	}
}

func TestHostPorts(t *testing.T) {
	cs := cluster(t)
	ns := "hostports"
	createNamespace(t, cs, ns)
	seen := map[string]bool{}
	for i := range 3 {
		p := pausePod(ns, fmt.Sprintf("web-%d", i))
		p.Spec.NodeSelector = map[string]string{"pair": "yes"}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		create(t, cs, p)
		if i == 2 {
			break
		}
		node := waitScheduled(t, cs, ns, p.Name)
		if seen[node] {
			t.Errorf("two pods with host port 8080 on %s", node)
		}
		seen[node] = true
	}
	msg := waitUnschedulable(t, cs, ns, "web-2")
	if !strings.Contains(msg, "2 node(s) didn't have free ports for the requested pod ports") {
		t.Errorf("third pod's message: %q", msg)
	}
}

func TestTopologySpread(t *testing.T) {
	cs := cluster(t)
	ns := "spread"
	createNamespace(t, cs, ns)
	perZone := map[string]int{}
	for i := range 6 {
		p := pausePod(ns, fmt.Sprintf("s-%d", i))
		p.Labels = map[string]string{"app": "spread"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		create(t, cs, p)
		node := waitScheduled(t, cs, ns, p.Name)
		var idx int
		fmt.Sscanf(node, "n-%d", &idx)
		perZone[zones[idx%3]]++
		// maxSkew 1: after each pod no zone has two more than another.
		lo, hi := 1<<30, 0
		for _, z := range zones {
			lo, hi = min(lo, perZone[z]), max(hi, perZone[z])
		}
		if hi-lo > 1 {
			t.Fatalf("after %d pods the zones hold %v", i+1, perZone)
		}
	}
}

func TestPodAntiAffinity(t *testing.T) {
	cs := cluster(t)
	ns := "anti"
	createNamespace(t, cs, ns)
	seen := map[string]bool{}
	for i := range 4 {
		p := pausePod(ns, fmt.Sprintf("a-%d", i))
		p.Labels = map[string]string{"app": "anti"}
		p.Spec.NodeSelector = map[string]string{"anti": "yes"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "anti"}}}}}}
		create(t, cs, p)
		if i == 3 {
			break
		}
		node := waitScheduled(t, cs, ns, p.Name)
		if seen[node] {
			t.Errorf("two anti-affine pods on %s", node)
		}
		seen[node] = true
	}
	msg := waitUnschedulable(t, cs, ns, "a-3")
	if !strings.Contains(msg, "3 node(s) didn't match pod anti-affinity rules") {
		t.Errorf("fourth pod's message: %q", msg)
	}
}

func TestPreemption(t *testing.T) {
	cs := cluster(t)
	ns := "preemption"
	createNamespace(t, cs, ns)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "test-high"}, Value: 1000}
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctxT(t), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.SchedulingV1().PriorityClasses().Delete(context.Background(), "test-high", metav1.DeleteOptions{})
	})

	low := withRequests(pausePod(ns, "low"), "1500m", "1Gi")
	low.Spec.NodeSelector = map[string]string{"preempt": "yes"}
	create(t, cs, low)
	if got := waitScheduled(t, cs, ns, "low"); got != "n-11" {
		t.Fatalf("low on %s", got)
	}
	high := withRequests(pausePod(ns, "high"), "1500m", "1Gi")
	high.Spec.NodeSelector = map[string]string{"preempt": "yes"}
	high.Spec.PriorityClassName = "test-high"
	create(t, cs, high)

	// The victim is deleted (gracefully: no agent runs it, so the test finishes the
	// deletion as a kubelet would) and the preemptor nominated for, then bound to, n-11.
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "low", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("low not preempted yet")
		}
		return cs.CoreV1().Pods(ns).Delete(context.Background(), "low", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "high", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "n-11" && p.Status.NominatedNodeName != "n-11" {
			return fmt.Errorf("high: node %q nominated %q", p.Spec.NodeName, p.Status.NominatedNodeName)
		}
		return nil
	})
	if got := waitScheduled(t, cs, ns, "high"); got != "n-11" {
		t.Errorf("high on %s, want n-11", got)
	}
}

// TestProfiles: schedulerName picks the profile of --scheduler-config (bin-packing scores
// MostAllocated: the fuller node), the default profile spreads (LeastAllocated: the
// emptier), and a pod naming no profile is left alone.
func TestProfiles(t *testing.T) {
	cs := cluster(t)
	ns := "profiles"
	createNamespace(t, cs, ns)
	base := withRequests(pausePod(ns, "base"), "2", "4Gi")
	base.Spec.NodeSelector = map[string]string{"pack": "yes"}
	create(t, cs, base)
	full := waitScheduled(t, cs, ns, "base")
	empty := map[string]string{"n-12": "n-13", "n-13": "n-12"}[full]

	packed := withRequests(pausePod(ns, "packed"), "500m", "1Gi")
	packed.Spec.NodeSelector = map[string]string{"pack": "yes"}
	packed.Spec.SchedulerName = "bin-packing"
	create(t, cs, packed)
	if got := waitScheduled(t, cs, ns, "packed"); got != full {
		t.Errorf("bin-packing profile: on %s, want the fuller %s", got, full)
	}
	spread := withRequests(pausePod(ns, "spread"), "500m", "1Gi")
	spread.Spec.NodeSelector = map[string]string{"pack": "yes"}
	create(t, cs, spread)
	if got := waitScheduled(t, cs, ns, "spread"); got != empty {
		t.Errorf("default profile: on %s, want the emptier %s", got, empty)
	}

	// A pod for a scheduler that does not exist stays Pending, untouched, while a pod
	// created after it is scheduled.
	other := pausePod(ns, "other")
	other.Spec.SchedulerName = "no-such-scheduler"
	create(t, cs, other)
	create(t, cs, pausePod(ns, "after"))
	waitScheduled(t, cs, ns, "after")
	p, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" || len(p.Status.Conditions) != 0 || p.Status.NominatedNodeName != "" {
		t.Errorf("pod for another scheduler was touched: node %q status %+v", p.Spec.NodeName, p.Status)
	}
	evs, err := cs.EventsV1().Events(ns).List(ctxT(t), metav1.ListOptions{FieldSelector: "regarding.name=other"})
	if err == nil && len(evs.Items) != 0 {
		t.Errorf("events about the pod for another scheduler: %v", evs.Items)
	}
}
