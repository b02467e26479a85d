package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rollout verbs of kubectl: pause (and a template change that waits), resume, restart,
// history; then a template whose pods never become ready, past progressDeadlineSeconds.
func scRollout(ctx context.Context, e *env) error {
	d := deployment("roll", 3, "registry.example/web:v1")
	d.Spec.ProgressDeadlineSeconds = ptr(int32(15))
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "roll", 1); err != nil {
		return err
	}
	kubectl := func(args ...string) error {
		out, err := e.kubectl(ctx, peerBinDir, args...)
		e.calls = append(e.calls, "kubectl "+args[0]+" "+args[1]+": "+out)
		return err
	}
	if err := kubectl("rollout", "pause", "deployment/roll"); err != nil {
		return err
	}
	if err := kubectl("set", "image", "deployment/roll", "app=registry.example/web:v2"); err != nil {
		return err
	}
	if err := e.until(ctx, time.Minute, "Deployment roll paused", func(ctx context.Context) (bool, error) {
		d, err := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, "roll", metav1.GetOptions{})
		if err != nil || d.Status.ObservedGeneration < d.Generation {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "DeploymentPaused" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "paused"); err != nil {
		return err
	}
	if err := kubectl("rollout", "resume", "deployment/roll"); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "roll", 0); err != nil {
		return err
	}
	if err := kubectl("rollout", "restart", "deployment/roll"); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "roll", 0); err != nil {
		return err
	}
	if err := kubectl("rollout", "history", "deployment/roll"); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "restarted"); err != nil {
		return err
	}
	if _, err := e.updateDeployment(ctx, "roll", func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = map[string]string{"oracle.kubeos.dev/ready": "false"}
	}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "Deployment roll past its deadline", func(ctx context.Context) (bool, error) {
		d, err := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, "roll", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return d.Status.UpdatedReplicas == 1 && d.Status.UnavailableReplicas == 1, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "stalled")
}

// Recreate: every old pod goes before a new one is made.
func scRecreate(ctx context.Context, e *env) error {
	d := deployment("recreate", 3, "registry.example/web:v1")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "recreate", 1); err != nil {
		return err
	}
	gen, err := e.updateDeployment(ctx, "recreate", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:v2" })
	if err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "recreate", gen); err != nil {
		return err
	}
	return e.checkpoint(ctx, "recreated")
}

// HorizontalPodAutoscaler (v2, CPU utilisation) where no metrics API is served: the
// conditions and events say so.
func scHPA(ctx context.Context, e *env) error {
	d := deployment("scaled", 2, "registry.example/web:v1")
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "scaled", 1); err != nil {
		return err
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "scaled"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "scaled"},
		MinReplicas:    ptr(int32(1)), MaxReplicas: 5,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(50))},
		}}},
	}}
	if _, err := e.s.cs.AutoscalingV2().HorizontalPodAutoscalers(e.ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "HPA scaled judged", func(ctx context.Context) (bool, error) {
		h, err := e.s.cs.AutoscalingV2().HorizontalPodAutoscalers(e.ns).Get(ctx, "scaled", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "judged")
}

// PersistentVolume binding: a claim binds the smallest fitting volume of its class; deleted,
// the Retain volume is Released.
func scPVBinding(ctx context.Context, e *env) error {
	pv := func(name, size string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "oracle-manual",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		}}
	}
	for _, v := range []*corev1.PersistentVolume{pv("o-pv-large", "5Gi"), pv("o-pv-small", "1Gi")} {
		if _, err := e.s.cs.CoreV1().PersistentVolumes().Create(ctx, v, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	defer func() {
		for _, n := range []string{"o-pv-large", "o-pv-small"} {
			_ = e.s.cs.CoreV1().PersistentVolumes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	}()
	// The claim comes once the binder has seen both volumes (it marks them Available): a
	// claim it syncs before finds no volume and, its class not existing, reports
	// ProvisioningFailed and waits for the next resync.
	if err := e.until(ctx, 2*time.Minute, "volumes Available", func(ctx context.Context) (bool, error) {
		for _, n := range []string{"o-pv-large", "o-pv-small"} {
			v, err := e.s.cs.CoreV1().PersistentVolumes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || v.Status.Phase != corev1.VolumeAvailable {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr("oracle-manual"),
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("512Mi")}},
	}}
	if _, err := e.s.cs.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return err
	}
	phase := func(what string, f func(ctx context.Context) bool) error {
		return e.until(ctx, 2*time.Minute, what, func(ctx context.Context) (bool, error) { return f(ctx), nil })
	}
	if err := phase("claim bound", func(ctx context.Context) bool {
		c, err := e.s.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, "claim", metav1.GetOptions{})
		v, err2 := e.s.cs.CoreV1().PersistentVolumes().Get(ctx, "o-pv-small", metav1.GetOptions{})
		return err == nil && err2 == nil && c.Status.Phase == corev1.ClaimBound && v.Status.Phase == corev1.VolumeBound
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "bound"); err != nil {
		return err
	}
	e.call("delete claim", e.s.cs.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, "claim", metav1.DeleteOptions{}))
	if err := phase("volume released", func(ctx context.Context) bool {
		v, err := e.s.cs.CoreV1().PersistentVolumes().Get(ctx, "o-pv-small", metav1.GetOptions{})
		_, err2 := e.s.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, "claim", metav1.GetOptions{})
		return err == nil && err2 != nil && v.Status.Phase == corev1.VolumeReleased
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "released")
}

// TTL after finished: a Job with ttlSecondsAfterFinished 0 is deleted, with its pods, once
// complete.
func scTTL(ctx context.Context, e *env) error {
	tpl := template(map[string]string{"app": "once"}, map[string]string{"sim.kubeos.dev/run-time": "1s"}, "registry.example/batch:v1")
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once"}, Spec: batchv1.JobSpec{Template: tpl, TTLSecondsAfterFinished: ptr(int32(0))}}
	if _, err := e.s.cs.BatchV1().Jobs(e.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "Job once and its pod collected", func(ctx context.Context) (bool, error) {
		_, err := e.s.cs.BatchV1().Jobs(e.ns).Get(ctx, "once", metav1.GetOptions{})
		pl, err2 := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		return err != nil && err2 == nil && len(pl.Items) == 0, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "collected")
}

// Garbage collection: ConfigMap owners with three dependents each, deleted with Background,
// Foreground and Orphan propagation; a dependent whose owner never existed; a Deployment
// deleted in the foreground (`kubectl delete --cascade=foreground`).
func scGC(ctx context.Context, e *env) error {
	cms := e.s.cs.CoreV1().ConfigMaps(e.ns)
	family := func(owner string) error {
		o, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		for _, d := range []string{"a", "b", "c"} {
			ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID, BlockOwnerDeletion: ptr(true)}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner + "-" + d, OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, o := range []string{"bg", "fg", "orphan"} {
		if err := family(o); err != nil {
			return err
		}
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dangling", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: "00000000-0000-0000-0000-000000000001"}}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	d := deployment("cascade", 2, "registry.example/web:v1")
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "cascade", 1); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "created"); err != nil {
		return err
	}
	for _, c := range []struct {
		owner  string
		policy metav1.DeletionPropagation
	}{{"bg", metav1.DeletePropagationBackground}, {"fg", metav1.DeletePropagationForeground}, {"orphan", metav1.DeletePropagationOrphan}} {
		e.call("delete "+c.owner, cms.Delete(ctx, c.owner, metav1.DeleteOptions{PropagationPolicy: &c.policy}))
	}
	out, err := e.kubectl(ctx, peerBinDir, "delete", "deployment/cascade", "--cascade=foreground", "--wait=false")
	e.calls = append(e.calls, "kubectl delete --cascade=foreground: "+out)
	if err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "owners and their dependents collected", func(ctx context.Context) (bool, error) {
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left := map[string]bool{}
		for _, c := range l.Items {
			left[c.Name] = true
			if len(c.OwnerReferences) > 0 {
				return false, nil // orphan-* still owned, or dangling not yet collected
			}
		}
		for _, gone := range []string{"bg", "bg-a", "bg-b", "bg-c", "fg", "fg-a", "fg-b", "fg-c", "orphan", "dangling"} {
			if left[gone] {
				return false, nil
			}
		}
		if !left["orphan-a"] || !left["orphan-b"] || !left["orphan-c"] {
			return false, nil
		}
		pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		rl, err2 := e.s.cs.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
		_, err3 := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, "cascade", metav1.GetOptions{})
		return err == nil && err2 == nil && err3 != nil && len(pl.Items) == 0 && len(rl.Items) == 0, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "collected")
}
