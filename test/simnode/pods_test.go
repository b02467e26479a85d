package simnode

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
)

func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sim-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

func podSpec(name, node string, policy corev1.RestartPolicy, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: policy,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
}

// create creates pod, retrying while the namespace's default ServiceAccount is not there yet.
func create(t *testing.T, cs kubernetes.Interface, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		got, err = cs.CoreV1().Pods(ns).Create(ctxT(t), pod, metav1.CreateOptions{})
		return err
	})
	return got
}

// waitPod waits until ok accepts the pod ns/name, and returns it.
func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string, ok func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	servertest.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		var err error
		if p, err = cs.CoreV1().Pods(ns).Get(ctxT(t), name, metav1.GetOptions{}); err != nil {
			return err
		}
		return ok(p)
	})
	return p
}

func cond(p *corev1.Pod, typ corev1.PodConditionType) (corev1.PodCondition, int) {
	for i, c := range p.Status.Conditions {
		if c.Type == typ {
			return c, i
		}
	}
	return corev1.PodCondition{}, -1
}

func isReady(p *corev1.Pod) error {
	if c, _ := cond(p, corev1.PodReady); c.Status != corev1.ConditionTrue || p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s phase %s Ready %q", p.Name, p.Status.Phase, c.Status)
	}
	return nil
}

// nodeRange is the pod range of a node: spec.podCIDR when the node IPAM controller set
// one, else the simulator's own (its annotation).
func nodeRange(t *testing.T, cs kubernetes.Interface, node string) (netip.Prefix, string) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctxT(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cidr := n.Spec.PodCIDR
	if cidr == "" {
		cidr = n.Annotations[simnode.PodCIDRAnnotation]
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		t.Fatalf("node %s pod range %q: %v", node, cidr, err)
	}
	return p, n.Status.Addresses[0].Address
}

// TestPodGoesRunningInKubeletOrder: a pod with an init container bound to a simulated
// node by spec.nodeName gets first its sandbox (IP, PodReadyToStartContainers) and then,
// in a later write, running containers and Ready — the kubelet's order.
func TestPodGoesRunningInKubeletOrder(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	ns := namespace(t, cs)
	pod := podSpec("ordered", nodeName(1), corev1.RestartPolicyAlways, map[string]string{slowAnnotation: "true"})
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	// Wait for the ServiceAccount first so the watch starts before the pod exists.
	create(t, cs, ns, podSpec("probe", "", corev1.RestartPolicyAlways, nil))
	w, err := cs.CoreV1().Pods(ns).Watch(ctxT(t), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "ordered").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create(t, cs, ns, pod)
	var seen []*corev1.Pod
	var final *corev1.Pod
	for final == nil {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error {
				t.Fatalf("watch event %v %v", ev.Type, ev.Object)
			}
			seen = append(seen, p)
			if isReady(p) == nil {
				final = p
			}
		case <-ctxT(t).Done():
			t.Fatalf("pod not Ready; saw %d versions", len(seen))
		}
	}
	// A version with the sandbox up and containers still waiting came before Ready.
	sandbox := false
	for _, p := range seen[:len(seen)-1] {
		c, _ := cond(p, corev1.PodReadyToStartContainers)
		if c.Status == corev1.ConditionTrue && p.Status.PodIP != "" && p.Status.Phase == corev1.PodPending &&
			len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "PodInitializing" {
			if i, _ := cond(p, corev1.PodInitialized); i.Status != corev1.ConditionFalse || i.Reason != "ContainersNotInitialized" {
				t.Errorf("sandbox version: Initialized %+v", i)
			}
			sandbox = true
		}
	}
	if !sandbox {
		t.Errorf("no version with the sandbox up before Ready among %d", len(seen))
	}
	// The kubelet's conditions, listed in its order, became True in order.
	order := []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady}
	last := -1
	for _, typ := range order {
		c, i := cond(final, typ)
		if c.Status != corev1.ConditionTrue || i < last {
			t.Errorf("condition %s: %+v at index %d (after %d)", typ, c, i, last)
		}
		last = i
	}
	r, _ := cond(final, corev1.PodReadyToStartContainers)
	in, _ := cond(final, corev1.PodInitialized)
	cr, _ := cond(final, corev1.ContainersReady)
	rd, _ := cond(final, corev1.PodReady)
	if in.LastTransitionTime.Before(&r.LastTransitionTime) || cr.LastTransitionTime.Before(&in.LastTransitionTime) ||
		rd.LastTransitionTime.Before(&cr.LastTransitionTime) || !r.LastTransitionTime.Before(&rd.LastTransitionTime) {
		t.Errorf("transition times not in the kubelet's order: sandbox %s initialized %s containersReady %s ready %s",
			r.LastTransitionTime, in.LastTransitionTime, cr.LastTransitionTime, rd.LastTransitionTime)
	}
	st := final.Status
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil || !st.ContainerStatuses[0].Ready ||
		st.ContainerStatuses[0].Started == nil || !*st.ContainerStatuses[0].Started || st.ContainerStatuses[0].Image != "busybox" {
		t.Errorf("container statuses %+v", st.ContainerStatuses)
	}
	if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil ||
		st.InitContainerStatuses[0].State.Terminated.Reason != "Completed" || st.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container statuses %+v", st.InitContainerStatuses)
	}
	cidr, hostIP := nodeRange(t, cs, nodeName(1))
	ip, err := netip.ParseAddr(st.PodIP)
	if err != nil || !cidr.Contains(ip) || len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP {
		t.Errorf("podIP %q podIPs %v not in the node's range %s", st.PodIP, st.PodIPs, cidr)
	}
	if st.HostIP != hostIP || len(st.HostIPs) != 1 || st.HostIPs[0].IP != hostIP {
		t.Errorf("hostIP %q hostIPs %v, want the node's %s", st.HostIP, st.HostIPs, hostIP)
	}
	if st.QOSClass != corev1.PodQOSBestEffort || st.StartTime == nil {
		t.Errorf("qosClass %q startTime %v", st.QOSClass, st.StartTime)
	}
}

// TestPodBoundByBinding: a pod bound through pods/binding (as a scheduler binds) runs.
func TestPodBoundByBinding(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	ns := namespace(t, cs)
	pod := podSpec("bound", "", corev1.RestartPolicyAlways, nil)
	pod.Spec.SchedulerName = "nobody" // no scheduler takes it
	create(t, cs, ns, pod)
	if err := cs.CoreV1().Pods(ns).Bind(ctxT(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Target: corev1.ObjectReference{Kind: "Node", Name: nodeName(2)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, cs, ns, "bound", isReady)
	if c, _ := cond(p, corev1.PodScheduled); c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled (the binding's) lost: %+v", p.Status.Conditions)
	}
}

// TestJobPodSucceeds: a pod with restartPolicy Never runs for its run time, then exits 0.
func TestJobPodSucceeds(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	ns := namespace(t, cs)
	create(t, cs, ns, podSpec("job", nodeName(3), corev1.RestartPolicyNever, map[string]string{simnode.RunTimeAnnotation: "1s"}))
	p := waitPod(t, cs, ns, "job", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	cs0 := p.Status.ContainerStatuses
	if len(cs0) != 1 || cs0[0].State.Terminated == nil || cs0[0].State.Terminated.Reason != "Completed" || cs0[0].State.Terminated.ExitCode != 0 || cs0[0].Ready {
		t.Fatalf("container statuses %+v", cs0)
	}
	if fin, start := cs0[0].State.Terminated.FinishedAt, cs0[0].State.Terminated.StartedAt; fin.Before(&start) {
		t.Errorf("finished %s before started %s", fin, start)
	}
	if c, _ := cond(p, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted" {
		t.Errorf("Ready %+v", c)
	}
}

// TestGracefulDelete: a DELETE with the default grace period ends with the pod gone: its
// node stops the containers, writes that status, and sends the final DELETE.
func TestGracefulDelete(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	ns := namespace(t, cs)
	create(t, cs, ns, podSpec("doomed", nodeName(4), corev1.RestartPolicyAlways, nil))
	p := waitPod(t, cs, ns, "doomed", isReady)
	w, err := cs.CoreV1().Pods(ns).Watch(ctxT(t), metav1.ListOptions{ResourceVersion: p.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "doomed").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cs.CoreV1().Pods(ns).Delete(ctxT(t), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	for {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatal("watch ended before the pod was deleted")
		}
		if ev.Type == watch.Deleted {
			break
		}
		last = ev.Object.(*corev1.Pod)
	}
	if last == nil || last.DeletionTimestamp == nil || len(last.Status.ContainerStatuses) != 1 || last.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("last version before deletion: %+v", last)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there: %v", err)
	}
}

// TestCrashLoopBackOff: a stage that makes containers exit 1 gives CrashLoopBackOff with
// a growing restartCount.
func TestCrashLoopBackOff(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	ns := namespace(t, cs)
	create(t, cs, ns, podSpec("crashy", nodeName(2), corev1.RestartPolicyAlways, map[string]string{crashAnnotation: "true"}))
	p := waitPod(t, cs, ns, "crashy", func(p *corev1.Pod) error {
		s := p.Status.ContainerStatuses
		if len(s) != 1 || s[0].RestartCount < 2 || s[0].State.Waiting == nil || s[0].State.Waiting.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("container statuses %+v", s)
		}
		return nil
	})
	s := p.Status.ContainerStatuses[0]
	if l := s.LastTerminationState.Terminated; l == nil || l.ExitCode != 1 || l.Reason != "Error" {
		t.Errorf("lastState %+v", s.LastTerminationState)
	}
	if c, _ := cond(p, corev1.PodReady); p.Status.Phase != corev1.PodRunning || c.Status != corev1.ConditionFalse || s.Ready {
		t.Errorf("phase %s Ready %+v container ready %v", p.Status.Phase, c, s.Ready)
	}
}

// TestNodeAuthorizerApplies: a simulated node acts as system:node:<name> (the simulator
// impersonates it per request): it may write the status of its own pods but gets 403 for
// another node's, from the Node authorizer and NodeRestriction.
func TestNodeAuthorizerApplies(t *testing.T) {
	cs := clientset(t)
	readyNodes(t, cs)
	ns := namespace(t, cs)
	create(t, cs, ns, podSpec("mine", nodeName(1), corev1.RestartPolicyAlways, nil))
	waitPod(t, cs, ns, "mine", isReady)
	patch := []byte(`{"status":{"conditions":[{"type":"example.com/gate","status":"True"}]}}`)
	_, err := asNode(t, nodeName(2)).CoreV1().Pods(ns).Patch(ctxT(t), "mine", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("another node patching the pod's status: %v, want 403", err)
	}
	t.Logf("node %s on %s's pod: %v", nodeName(2), nodeName(1), err)
	if err := asNode(t, nodeName(2)).CoreV1().Pods(ns).Delete(ctxT(t), "mine", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("another node deleting the pod: %v, want 403", err)
	}
	if _, err := asNode(t, nodeName(1)).CoreV1().Pods(ns).Patch(ctxT(t), "mine", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("its own node patching the pod's status: %v", err)
	}
	// A node cannot change another Node either (NodeRestriction).
	if _, err := asNode(t, nodeName(2)).CoreV1().Nodes().PatchStatus(ctxT(t), nodeName(1), []byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`)); !apierrors.IsForbidden(err) {
		t.Fatalf("node %s patching node %s: %v, want 403", nodeName(2), nodeName(1), err)
	}
}
