package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestStatefulSetKeepsData is issue 16's: a StatefulSet with a volumeClaimTemplate of no
// class (the default class, local-path, is filled in by admission) keeps its data across
// the deletion of its pod. The pod counts its starts in a file of its volume.
func TestStatefulSetKeepsData(t *testing.T) {
	volumeSuite.Need(t)
	cs, _ := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	labels := map[string]string{"app": "counter"}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "counter"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(int32(1)), ServiceName: "counter",
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(1)), AutomountServiceAccountToken: ptr.To(false),
			NodeSelector: map[string]string{corev1.LabelHostname: nodeName},
			Containers: []corev1.Container{{Name: "main", Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
				Command:        []string{"sh", "-c", "echo start >> /data/starts; touch /tmp/ready; exec sleep 3600"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}}}}},
	}}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	starts := func(want int) {
		t.Helper()
		servertest.Eventually(t, 3*time.Minute, 250*time.Millisecond, func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "counter-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !ready(p) {
				return fmt.Errorf("counter-0 not ready: %s %v %+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			}
			// The file on the node, through the claim's PV.
			pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-counter-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(agentDir, "volumes", pvc.Spec.VolumeName, "starts"))
			if err != nil {
				return err
			}
			if got := strings.Count(string(b), "start\n"); got != want {
				return fmt.Errorf("starts = %d, want %d", got, want)
			}
			return nil
		})
	}
	starts(1)
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-counter-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(pvc.Spec.StorageClassName, "") != "local-path" || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim: class %v phase %s", pvc.Spec.StorageClassName, pvc.Status.Phase)
	}
	old, err := cs.CoreV1().Pods(ns).Get(ctx, "counter-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "counter-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "counter-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("counter-0 not replaced yet")
		}
		return nil
	})
	starts(2)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
