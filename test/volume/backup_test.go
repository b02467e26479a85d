package volume

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/platform"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestVolumeArchiveRestore: the Volume side of a Backup. A Volume's files, archived
// through its node's agent, are restored into another Volume, where a pod reads them; a
// Volume no pod has used yet has no files (ErrVolumeNotBound).
func TestVolumeArchiveRestore(t *testing.T) {
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	reader, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files := platform.VolumeFiles{Reader: reader, Nodes: cs.CoreV1().RESTClient()}
	for _, name := range []string{"src", "dst"} {
		if _, err := ks.Volumes(ns).Create(ctx, newVolume(name, "16Mi", v1alpha1.DeletionDelete), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dst := waitVolume(t, ks, ns, "dst", "Active", active)
	if _, err := files.VolumeArchive(ctx, dst); !errors.Is(err, platform.ErrVolumeNotBound) {
		t.Fatalf("archive of an unused Volume: %v, want ErrVolumeNotBound", err)
	}
	if p := runPod(t, cs, ns, claimPod("writer", "", "src-volume", "mkdir -p /data/d && echo payload > /data/d/f && ln -s d/f /data/link")); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("writer: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	if p := runPod(t, cs, ns, claimPod("binder", "", "dst-volume", "true")); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("binder: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	src := waitVolume(t, ks, ns, "src", "bound", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" })
	dst = waitVolume(t, ks, ns, "dst", "bound", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" })
	rc, err := files.VolumeArchive(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	err = files.RestoreVolume(ctx, dst, rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := runPod(t, cs, ns, claimPod("reader", "", "dst-volume", `test "$(cat /data/d/f)" = payload && test "$(cat /data/link)" = payload`))
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("reader of the restored Volume: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
}
