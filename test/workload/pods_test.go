package workload

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
)

func makeNS(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}}}}},
	}
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func bind(t *testing.T, cs kubernetes.Interface, ns, pod, node string) error {
	t.Helper()
	return cs.CoreV1().Pods(ns).Bind(ctxT(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
}

// TestPodDefaultsAndStatus: upstream's defaults and PrepareForCreate apply, and pods/status
// changes the status only.
func TestPodDefaultsAndStatus(t *testing.T) {
	cs := clientset(t)
	ns := "pod-defaults"
	makeNS(t, cs, ns)
	pods := cs.CoreV1().Pods(ns)
	p := newPod("p", nil)
	p.Status.Phase = corev1.PodRunning // a client cannot set status on create
	got, err := pods.Create(ctxT(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := got.Spec.Containers[0]
	if got.Spec.RestartPolicy != corev1.RestartPolicyAlways || got.Spec.DNSPolicy != corev1.DNSClusterFirst ||
		*got.Spec.TerminationGracePeriodSeconds != 30 || got.Spec.SchedulerName != "default-scheduler" ||
		c.TerminationMessagePath != "/dev/termination-log" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("defaults not applied: %+v", got.Spec)
	}
	if got.Status.Phase != corev1.PodPending || got.Status.QOSClass != corev1.PodQOSBurstable || got.Generation != 1 {
		t.Errorf("status %+v generation %d, want Pending, Burstable, 1", got.Status, got.Generation)
	}
	// The scheduler writes PodScheduled=False (no nodes) meanwhile, as kube-scheduler does:
	// read, change, write, again on a conflict.
	var st *corev1.Pod
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctxT(t), got.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP = "10.244.0.5"
		cur.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.5"}}
		cur.Spec.Containers[0].Image = "changed" // ignored by the status subresource
		st, err = pods.UpdateStatus(ctxT(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Phase != corev1.PodRunning || st.Status.PodIP != "10.244.0.5" || st.Spec.Containers[0].Image != "registry.k8s.io/pause:3.10" {
		t.Errorf("after status update: phase %s ip %s image %s", st.Status.Phase, st.Status.PodIP, st.Spec.Containers[0].Image)
	}
	// A changed immutable field is refused with upstream's message.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctxT(t), st.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Containers[0].Name = "renamed"
		_, err = pods.Update(ctxT(t), cur, metav1.UpdateOptions{})
		return err
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields other than") {
		t.Errorf("renaming a container: %v", err)
	}
	// Field selectors on list and watch: status.phase, status.podIP.
	l, err := pods.List(ctxT(t), metav1.ListOptions{FieldSelector: "status.phase=Running,status.podIP=10.244.0.5"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list by status.phase: %v %v", l, err)
	}
}

// TestBinding: pods/binding (the scheduler's path) and the bindings resource set the node and
// PodScheduled, once.
func TestBinding(t *testing.T) {
	cs := clientset(t)
	ns := "binding"
	makeNS(t, cs, ns)
	pods := cs.CoreV1().Pods(ns)
	for _, n := range []string{"a", "b", "gated"} {
		p := newPod(n, nil)
		// No scheduler writes PodScheduled=False meanwhile: the in-process scheduler's patch can
		// land after this test's binding and replace the condition (kube-scheduler's would too).
		p.Spec.SchedulerName = "nobody"
		if n == "gated" {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}
		if _, err := pods.Create(ctxT(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// client-go's Bind POSTs pods/a/binding.
	if err := bind(t, cs, ns, "a", "node-1"); err != nil {
		t.Fatal(err)
	}
	a, err := pods.Get(ctxT(t), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.NodeName != "node-1" {
		t.Errorf("nodeName %q", a.Spec.NodeName)
	}
	if c := condition(a, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled: %+v", a.Status.Conditions)
	}
	err = bind(t, cs, ns, "a", "node-2")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `pod a is already assigned to node "node-1"`) {
		t.Errorf("second binding: %v", err)
	}
	err = bind(t, cs, ns, "gated", "node-1")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "non-empty .spec.schedulingGates") {
		t.Errorf("binding a gated pod: %v", err)
	}
	// b was found unschedulable first (as the scheduler writes it, or the scheduler itself).
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctxT(t), "b", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/0 nodes are available", ObservedGeneration: 1, LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = pods.UpdateStatus(ctxT(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The legacy bindings resource: POST namespaces/<ns>/bindings.
	body := `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"b"},"target":{"kind":"Node","name":"node-2"}}`
	res := cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("bindings").SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctxT(t))
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	b, _ := pods.Get(ctxT(t), "b", metav1.GetOptions{})
	if b.Spec.NodeName != "node-2" {
		t.Errorf("bindings: nodeName %q", b.Spec.NodeName)
	}
	// The condition is replaced whole, as upstream's UpdatePodCondition: nothing of the
	// unschedulable one stays.
	if c := condition(b, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "" || c.Message != "" ||
		c.ObservedGeneration != 0 || !c.LastProbeTime.IsZero() || c.LastTransitionTime.IsZero() {
		t.Errorf("PodScheduled after binding an unschedulable pod: %+v", c)
	}
	// A binding to nothing is invalid; to a missing pod is 404.
	err = cs.CoreV1().Pods(ns).Bind(ctxT(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("binding without a target: %v", err)
	}
	if err := bind(t, cs, ns, "missing", "node-1"); !apierrors.IsNotFound(err) {
		t.Errorf("binding a missing pod: %v", err)
	}
}

// TestGracefulDeletion: a bound pod stays, Terminating, for its grace period until a delete
// with grace 0 and its UID (the node agent's) removes it; an unbound pod goes at once.
func TestGracefulDeletion(t *testing.T) {
	cs := clientset(t)
	ns := "graceful"
	makeNS(t, cs, ns)
	pods := cs.CoreV1().Pods(ns)
	for _, n := range []string{"bound", "unbound"} {
		if _, err := pods.Create(ctxT(t), newPod(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bind(t, cs, ns, "bound", "node-1"); err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctxT(t), metav1.ListOptions{FieldSelector: "metadata.name=bound"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := pods.Delete(ctxT(t), "unbound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctxT(t), "unbound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unbound pod after delete: %v", err)
	}
	before := time.Now()
	if err := pods.Delete(ctxT(t), "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctxT(t), "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound pod after delete: %v", err)
	}
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 ||
		p.DeletionTimestamp.Time.Before(before.Add(29*time.Second)) {
		t.Errorf("deletionTimestamp %v grace %v, want now+30s and 30", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	// A second delete with a shorter grace moves the deadline earlier.
	if err := pods.Delete(ctxT(t), "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](10)}); err != nil {
		t.Fatal(err)
	}
	p, _ = pods.Get(ctxT(t), "bound", metav1.GetOptions{})
	if *p.DeletionGracePeriodSeconds != 10 {
		t.Errorf("grace after a shorter delete: %d", *p.DeletionGracePeriodSeconds)
	}
	// The agent's final delete: grace 0 with a UID precondition; a wrong UID is a conflict.
	wrong := types.UID("not-the-uid")
	err = pods.Delete(ctxT(t), "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &wrong}})
	if !apierrors.IsConflict(err) {
		t.Errorf("delete with a wrong UID: %v", err)
	}
	if err := pods.Delete(ctxT(t), "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctxT(t), "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the final delete: %v", err)
	}
	deleted := false
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			deleted = true
			break
		}
	}
	if !deleted {
		t.Error("the watch saw no DELETED event")
	}
}

// TestEviction: pods/eviction is refused with 429 and the budget's name while the budget
// allows no disruption, and deletes the pod (gracefully) once it allows one. The budget's
// status is the disruption controller's.
func TestEviction(t *testing.T) {
	cs := clientset(t)
	ns := "eviction"
	makeNS(t, cs, ns)
	pods := cs.CoreV1().Pods(ns)
	lbl := map[string]string{"app": "web"}
	ready := func(name string) {
		t.Helper()
		if _, err := pods.Create(ctxT(t), newPod(name, lbl), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := bind(t, cs, ns, name, "node-1"); err != nil {
			t.Fatal(err)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := pods.Get(ctxT(t), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			_, err = pods.UpdateStatus(ctxT(t), p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ready("w1")
	pdbs := cs.PolicyV1().PodDisruptionBudgets(ns)
	if _, err := pdbs.Create(ctxT(t), &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intOrStr(1)), Selector: &metav1.LabelSelector{MatchLabels: lbl}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	budget := func(healthy, allowed int32) {
		t.Helper()
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			b, err := pdbs.Get(ctxT(t), "web-pdb", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if b.Status.ObservedGeneration != b.Generation || b.Status.CurrentHealthy != healthy || b.Status.DisruptionsAllowed != allowed {
				return fmt.Errorf("budget status %+v, want %d healthy, %d allowed", b.Status, healthy, allowed)
			}
			return nil
		})
	}
	budget(1, 0)
	evict := func() error {
		return pods.EvictV1(ctxT(t), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: ns}})
	}
	err := evict()
	var se *apierrors.StatusError
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction with no disruption allowed: %v, want 429", err)
	}
	if se, _ = err.(*apierrors.StatusError); se == nil || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 ||
		!strings.Contains(se.ErrStatus.Details.Causes[0].Message, "web-pdb") || se.ErrStatus.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Errorf("429 does not name the budget: %v", err)
	}
	if got, _ := pods.Get(ctxT(t), "w1", metav1.GetOptions{}); got.DeletionTimestamp != nil {
		t.Error("a refused eviction deleted the pod")
	}
	ready("w2")
	budget(2, 1)
	if err := evict(); err != nil {
		t.Fatalf("eviction with a disruption allowed: %v", err)
	}
	got, _ := pods.Get(ctxT(t), "w1", metav1.GetOptions{})
	if got.DeletionTimestamp == nil {
		t.Error("an allowed eviction left the pod")
	}
	after, _ := pdbs.Get(ctxT(t), "web-pdb", metav1.GetOptions{})
	if ts := after.Status.DisruptedPods["w1"]; ts.IsZero() && after.Status.CurrentHealthy == 2 {
		t.Errorf("budget after the eviction: %+v", after.Status)
	}
}

// TestScaleAndHPAVersions: the scale subresource of the workload kinds, and one
// HorizontalPodAutoscaler served in autoscaling/v2 and v1.
func TestScaleAndHPAVersions(t *testing.T) {
	cs := clientset(t)
	ns := "scale"
	makeNS(t, cs, ns)
	rs := cs.CoreV1().ReplicationControllers(ns)
	_, err := rs.Create(ctxT(t), &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: map[string]string{"app": "rc"},
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rc"}}, Spec: newPod("x", nil).Spec}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := rs.GetScale(ctxT(t), "rc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 1 || sc.Status.Selector != "app=rc" {
		t.Errorf("scale: %+v", sc)
	}
	// The replication controller writes status meanwhile, so the scale read
	// above may be stale by the time it is written back.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := rs.GetScale(ctxT(t), "rc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Replicas = 4
		sc, err = rs.UpdateScale(ctxT(t), "rc", cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rs.Get(ctxT(t), "rc", metav1.GetOptions{})
	if *rc.Spec.Replicas != 4 {
		t.Errorf("replicas after scale: %d", *rc.Spec.Replicas)
	}
	sc.Spec.Replicas = -1
	if _, err := rs.UpdateScale(ctxT(t), "rc", sc, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
		t.Errorf("negative replicas: %v", err)
	}

	target := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	_, err = cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctxT(t), &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MinReplicas: ptr.To[int32](2), MaxReplicas: 7,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Get(ctxT(t), "h", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Spec.MaxReplicas != 7 || v1.Spec.TargetCPUUtilizationPercentage == nil || *v1.Spec.TargetCPUUtilizationPercentage != 60 {
		t.Errorf("v2 object read in v1: %+v", v1.Spec)
	}
	// The HPA controller writes status meanwhile (ScalingActive=False: no metrics API).
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Get(ctxT(t), "h", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.MaxReplicas = 9
		_, err = cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Update(ctxT(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxT(t), "h", metav1.GetOptions{})
	if v2.Spec.MaxReplicas != 9 || len(v2.Spec.Metrics) != 1 {
		t.Errorf("v1 write read in v2: %+v", v2.Spec)
	}
	l, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).List(ctxT(t), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].APIVersion != "" && l.Items[0].APIVersion != "autoscaling/v1" {
		t.Errorf("v1 list: %v %+v", err, l)
	}
	_ = autoscalingv1.SchemeGroupVersion
}

// TestNodeWatchByNodeName: the node agent's watch, fieldSelector=spec.nodeName, sees its pods
// only (protobuf, as the kubelet's client).
func TestNodeWatchByNodeName(t *testing.T) {
	cs := clientset(t)
	ns := "nodewatch"
	makeNS(t, cs, ns)
	pods := cs.CoreV1().Pods(ns)
	w, err := pods.Watch(ctxT(t), metav1.ListOptions{FieldSelector: "spec.nodeName=node-w"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, n := range []string{"mine", "other"} {
		if _, err := pods.Create(ctxT(t), newPod(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bind(t, cs, ns, "other", "node-x"); err != nil {
		t.Fatal(err)
	}
	if err := bind(t, cs, ns, "mine", "node-w"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.Name != "mine" || ev.Type != watch.Added {
			data, _ := json.Marshal(ev)
			t.Errorf("first event: %s", data)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event for the pod bound to node-w")
	}
}

func intOrStr(n int) intstrValue { return intstrFromInt(n) }

// TestClaimPending: a new PersistentVolumeClaim is served with status.phase Pending, as
// kube-apiserver defaults it (its strategy clears the status the request brought).
func TestClaimPending(t *testing.T) {
	cs := clientset(t)
	ns := "claims"
	makeNS(t, cs, ns)
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctxT(t), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("none"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("created claim's phase %q, want Pending", pvc.Status.Phase)
	}
	got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctxT(t), "c", metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.ClaimPending {
		t.Errorf("read claim's phase %q (%v), want Pending", got.Status.Phase, err)
	}
}
