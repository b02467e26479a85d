package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Proportional scaling: 10 replicas, maxSurge 3, maxUnavailable 2, a rollout stuck on pods
// that never become ready (old 8 + new 5), then scaled to 20 mid-rollout: the 10 more are
// shared between the ReplicaSets in proportion, with upstream's rounding.
func scProportional(ctx context.Context, e *env) error {
	d := deployment("prop", 10, "registry.example/web:v1")
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromInt32(3)), MaxUnavailable: ptr(intstr.FromInt32(2))}
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "prop", 1); err != nil {
		return err
	}
	gen, err := e.updateDeployment(ctx, "prop", func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = map[string]string{"oracle.kubeos.dev/ready": "false"}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:v2"
	})
	if err != nil {
		return err
	}
	stuck := func(what string, gen int64, total int32) error {
		return e.until(ctx, 3*time.Minute, what, func(ctx context.Context) (bool, error) {
			d, err := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, "prop", metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration < gen || d.Status.Replicas != total {
				return false, nil
			}
			rl, err := e.s.cs.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			var spec, have int32
			for _, rs := range rl.Items {
				spec += *rs.Spec.Replicas
				have += rs.Status.Replicas
				if rs.Status.ObservedGeneration < rs.Generation {
					return false, nil
				}
			}
			if spec != total || have != total {
				return false, nil
			}
			pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()})
			if err != nil || int32(len(pl.Items)) != total {
				return false, nil
			}
			for _, p := range pl.Items {
				if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
					return false, nil
				}
			}
			return true, nil
		})
	}
	if err := stuck("rollout stuck at 8 old + 5 new", gen, 13); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "stuck"); err != nil {
		return err
	}
	if gen, err = e.updateDeployment(ctx, "prop", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(20)) }); err != nil {
		return err
	}
	if err := stuck("scaled to 20 mid-rollout", gen, 23); err != nil {
		return err
	}
	return e.checkpoint(ctx, "scaled")
}

// StatefulSet volumeClaimTemplates: each ordinal's claim binds a volume (1Gi for web-0, 2Gi
// for web-1, the smallest fit in creation order); scaled down to 1 with
// persistentVolumeClaimRetentionPolicy whenScaled Delete, web-1's claim goes and its
// Retain volume is Released.
func scStatefulSetVolumes(ctx context.Context, e *env) error {
	pv := func(name, size string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "oracle-sts",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		}}
	}
	names := []string{"o-sts-pv-1g", "o-sts-pv-2g"}
	for _, v := range []*corev1.PersistentVolume{pv(names[0], "1Gi"), pv(names[1], "2Gi")} {
		if _, err := e.s.cs.CoreV1().PersistentVolumes().Create(ctx, v, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	defer func() {
		for _, n := range names {
			_ = e.s.cs.CoreV1().PersistentVolumes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	}()
	if err := e.until(ctx, 2*time.Minute, "volumes Available", func(ctx context.Context) (bool, error) {
		for _, n := range names {
			v, err := e.s.cs.CoreV1().PersistentVolumes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || v.Status.Phase != corev1.VolumeAvailable {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	lbl := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr(int32(2)), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: template(lbl, nil, "registry.example/db:v1"),
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr("oracle-sts"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}},
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		},
	}}
	sts.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := e.s.cs.AppsV1().StatefulSets(e.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return err
	}
	ready := func(what string, n int32) error {
		return e.until(ctx, 3*time.Minute, what, func(ctx context.Context) (bool, error) {
			s, err := e.s.cs.AppsV1().StatefulSets(e.ns).Get(ctx, "db", metav1.GetOptions{})
			if err != nil || s.Status.ObservedGeneration < s.Generation || s.Status.ReadyReplicas != n || s.Status.Replicas != n {
				return false, nil
			}
			cl, err := e.s.cs.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil || int32(len(cl.Items)) != n {
				return false, nil
			}
			for _, c := range cl.Items {
				if c.Status.Phase != corev1.ClaimBound || c.DeletionTimestamp != nil {
					return false, nil
				}
			}
			return e.podsSettled(ctx, labels.SelectorFromSet(lbl), int(n))
		})
	}
	if err := ready("StatefulSet db with its claims bound", 2); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "bound"); err != nil {
		return err
	}
	if _, err := e.s.cs.AppsV1().StatefulSets(e.ns).Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := ready("StatefulSet db scaled to 1, its claim gone", 1); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "web-1's volume Released", func(ctx context.Context) (bool, error) {
		v, err := e.s.cs.CoreV1().PersistentVolumes().Get(ctx, names[1], metav1.GetOptions{})
		return err == nil && v.Status.Phase == corev1.VolumeReleased, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "scaled")
}
