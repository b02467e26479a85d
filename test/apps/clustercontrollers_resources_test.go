package apps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestResourceQuota: a quota's status shows hard and used, follows creations, and a pod
// beyond it is refused with upstream's message.
func TestResourceQuota(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "quota")
	// The namespace's kube-root-ca.crt first: created after the quota's first count and before
	// the quota controller's configmap monitor runs, it would be counted only at the next
	// full resync (upstream has the same window).
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("2"), "count/configmaps": resource.MustParse("10")}}}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := func(want string) {
		t.Helper()
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return err
			}
			h, u := q.Status.Hard, q.Status.Used
			got := fmt.Sprintf("hard pods=%s configmaps=%s used pods=%s configmaps=%s", h.Pods(), ptr.To(h["count/configmaps"]), u.Pods(), ptr.To(u["count/configmaps"]))
			if got != want {
				return fmt.Errorf("quota status %q, want %q", got, want)
			}
			return nil
		})
	}
	// the namespace's kube-root-ca.crt counts
	status("hard pods=2 configmaps=10 used pods=0 configmaps=1")
	for _, n := range []string{"p1", "p2"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	status("hard pods=2 configmaps=10 used pods=2 configmaps=1")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p3"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if want := `pods "p3" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`; err == nil || !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("third pod: %v, want %s", err, want)
	}
	// a deletion frees the quota again
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	status("hard pods=2 configmaps=10 used pods=1 configmaps=1")
	// (admission reads the quota from its informer, a moment behind the status just read)
	servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

// TestPodGC: pods of a deleted node are deleted, and terminated pods beyond the
// threshold go, oldest first.
func TestPodGC(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "podgc")
	liveNode(t, cs, "gc-doomed", nil)
	liveNode(t, cs, "gc-node", nil)
	runningPod(t, cs, ns, webPod("orphan", 8080), "gc-doomed", "10.250.4.1", true)
	runningPod(t, cs, ns, webPod("kept", 8080), "gc-node", "10.250.4.2", true)
	heartbeats.set("gc-doomed", false)
	if err := cs.CoreV1().Nodes().Delete(ctx, "gc-doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod of a deleted node: %v", err)
	})
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("pod of a live node: %v", err)
	}

	const n = terminatedGCLimit + 3
	for i := range n {
		p := runningPod(t, cs, ns, webPod(fmt.Sprintf("done-%d", i), 8080), "gc-node", fmt.Sprintf("10.250.4.%d", 10+i), false)
		p.Status.Phase = corev1.PodSucceeded
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Succeeded"})
		if err != nil {
			return err
		}
		if len(l.Items) != terminatedGCLimit {
			return fmt.Errorf("%d terminated pods, want the threshold %d", len(l.Items), terminatedGCLimit)
		}
		return nil
	})
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("running pod: %v", err)
	}
}

// TestPersistentVolumeBinding: a claim binds to the smallest fitting volume of its class;
// a claim of a class with an external provisioner waits for it; both carry their
// protection finalizers.
func TestPersistentVolumeBinding(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "pv")
	for _, v := range []struct {
		name, size, class string
	}{{"pv-small", "100Mi", "manual"}, {"pv-fit", "1Gi", "manual"}, {"pv-big", "5Gi", "manual"}, {"pv-other", "1Gi", "other"}} {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: v.name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(v.size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              v.class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + v.name}},
		}}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), v.name, metav1.DeleteOptions{})
		})
	}
	claim := func(name, class string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Mi")}}}}
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data", "manual"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pv-fit", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName != "pv-fit" || pv.Status.Phase != corev1.VolumeBound ||
			pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "data" || pv.Spec.ClaimRef.Namespace != ns || c.Status.Capacity.Storage().String() != "1Gi" {
			return fmt.Errorf("claim %s volume %q capacity %s; pv-fit %s claimRef %+v", c.Status.Phase, c.Spec.VolumeName, c.Status.Capacity.Storage(), pv.Status.Phase, pv.Spec.ClaimRef)
		}
		if !slices.Contains(c.Finalizers, "kubernetes.io/pvc-protection") || !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
			return fmt.Errorf("finalizers: claim %v, volume %v", c.Finalizers, pv.Finalizers)
		}
		return nil
	})

	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "external"}, Provisioner: "example.com/external"}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), "external", metav1.DeleteOptions{})
	})
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("dyn", "external"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "dyn", metav1.GetOptions{})
		if err != nil {
			return err
		}
		// Pending, or no phase: Kube does not default status.phase on reads (see the report)
		if (c.Status.Phase != corev1.ClaimPending && c.Status.Phase != "") || c.Annotations["volume.kubernetes.io/storage-provisioner"] != "example.com/external" {
			return fmt.Errorf("claim of an external class: %s, annotations %v", c.Status.Phase, c.Annotations)
		}
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=dyn"})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "ExternalProvisioning" }) {
			return fmt.Errorf("no ExternalProvisioning event")
		}
		return nil
	})
}

// TestHorizontalPodAutoscalerWithoutMetrics: with no metrics.k8s.io served, an HPA on CPU
// says so in ScalingActive=False, as on a cluster without metrics-server.
func TestHorizontalPodAutoscalerWithoutMetrics(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "hpa")
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}}}}
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive {
				if c.Status != corev1.ConditionFalse || c.Reason != "FailedGetResourceMetric" ||
					!strings.Contains(c.Message, "unable to fetch metrics from resource metrics API") {
					return fmt.Errorf("ScalingActive %s %s: %s", c.Status, c.Reason, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no ScalingActive condition: %+v", h.Status.Conditions)
	})
}

// TestEphemeralVolume: a pod with a generic ephemeral volume gets its claim, owned by it.
func TestEphemeralVolume(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "ephemeral")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/s"}}}},
		Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}}}}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "app-scratch", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != pod.UID || !ptr.Deref(c.OwnerReferences[0].Controller, false) {
			return fmt.Errorf("claim owners %+v", c.OwnerReferences)
		}
		return nil
	})
}
