package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestSimulatedNode: a Volume used by a pod on a simulated node is provisioned without an
// agent (a /simulated path nothing creates), binds, and its PV goes with Delete.
func TestSimulatedNode(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Volumes(ns).Create(ctx, newVolume("sim", "1Gi", v1alpha1.DeletionDelete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVolume(t, ks, ns, "sim", "Active", active)
	pod := claimPod("user", "", "sim-volume", "true")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "volsim-1"}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := waitVolume(t, ks, ns, "sim", "bound on the simulated node", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" && v.Status.Node == "volsim-1" })
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, v.Status.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.Local == nil || !strings.HasPrefix(pv.Spec.Local.Path, "/simulated/volumes/") {
		t.Fatalf("simulated PV source %+v", pv.Spec.PersistentVolumeSource)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := ks.Volumes(ns).Delete(ctx, "sim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pv still there: %v", err)
		}
		return nil
	})
}
