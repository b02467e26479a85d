package lifecycle

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/s3"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/platform"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestVolumeArchiveRestore: the Volume side of a Backup. A Volume's files, archived
// through its node's agent, are restored into another Volume, where a pod reads them; a
// Volume no pod has used yet has no files (ErrVolumeNotBound).
func TestVolumeArchiveRestore(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	cfg, err := volumeSrv.Config()
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

// TestVolumeBackup: a Backup whose source is a Volume writes a gzipped tar of the Volume's
// files (read through its node's agent) into a Bucket of the embedded S3 store.
func TestVolumeBackup(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Buckets(ns).Create(ctx, &v1alpha1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: "vault"},
		Spec: v1alpha1.BucketSpec{DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Volumes(ns).Create(ctx, newVolume("data", "16Mi", v1alpha1.DeletionDelete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := runPod(t, cs, ns, claimPod("writer", "", "data-volume", "mkdir -p /data/d && echo payload > /data/d/f")); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("writer: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	waitVolume(t, ks, ns, "data", "bound", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" })
	if _, err := ks.Backups(ns).Create(ctx, &v1alpha1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "data-once"},
		Spec: v1alpha1.BackupSpec{Source: v1alpha1.BackupSource{Kind: "Volume", Name: "data"},
			Target: v1alpha1.BackupTarget{Bucket: "vault"}, DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var b *v1alpha1.Backup
	servertest.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		var err error
		if b, err = ks.Backups(ns).Get(ctx, "data-once", metav1.GetOptions{}); err != nil {
			return err
		}
		if b.Status.LastSuccessful == nil {
			return fmt.Errorf("no archive yet: phase %s, last failure %+v", b.Status.Phase, b.Status.LastFailure)
		}
		return nil
	})
	run := b.Status.LastSuccessful
	if !strings.HasSuffix(run.Archive, ".tar.gz") || run.SizeBytes == 0 {
		t.Fatalf("archive %q of %d bytes", run.Archive, run.SizeBytes)
	}
	// The archive holds the file: read it from the store with the entry's admin key.
	cfg, err := volumeSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bk, err := ks.Buckets(ns).Get(ctx, "vault", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := servers.List(ctx, c, servers.S3)
	if err != nil || len(entries) == 0 {
		t.Fatalf("s3 entries: %v %v", entries, err)
	}
	e := entries[0]
	s3c := s3.NewClient(e.URL, string(e.Data[servers.KeyAccessKeyID]), string(e.Data[servers.KeySecretAccessKey]), string(e.Data[servers.KeyRegion]))
	rc, err := s3c.Get(ctx, bk.Status.BucketName, run.Archive)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == "d/f" {
			body, _ := io.ReadAll(tr)
			found = strings.TrimSpace(string(body)) == "payload"
		}
	}
	if !found {
		t.Errorf("the archive %s has no d/f with the payload", run.Archive)
	}
}
