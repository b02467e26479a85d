package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	kubeos "kubeos.dev/kube/pkg/client/clientset/versioned/typed/kubeos/v1alpha1"
)

func restoring(name, backup string) *v1alpha1.Volume {
	v := newVolume(name, "16Mi", v1alpha1.DeletionDelete)
	v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: backup}
	return v
}

// waitBackupArchive waits for the first successful run of Backup name.
func waitBackupArchive(t *testing.T, ks kubeos.KubeosV1alpha1Interface, ns, name string) *v1alpha1.BackupRun {
	t.Helper()
	var run *v1alpha1.BackupRun
	servertest.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		b, err := ks.Backups(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if run = b.Status.LastSuccessful; run == nil {
			return fmt.Errorf("backup %s: no archive yet: phase %s, last failure %+v", name, b.Status.Phase, b.Status.LastFailure)
		}
		return nil
	})
	return run
}

// condition is v's condition of type typ (zero when absent).
func condition(v *v1alpha1.Volume, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(v.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestVolumeRestoreFromBackup: a pod writes files in a Volume, a Backup archives them into
// a Bucket, a new Volume with restoreFrom that Backup becomes Active (reason Restored) only
// once the archive is unpacked into it, on the agent's node, and a new pod reads the files
// back from it.
func TestVolumeRestoreFromBackup(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Buckets(ns).Create(ctx, &v1alpha1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: "vault"},
		Spec: v1alpha1.BucketSpec{DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Volumes(ns).Create(ctx, newVolume("src", "16Mi", v1alpha1.DeletionDelete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	payload := fmt.Sprintf("payload-%d", time.Now().UnixNano())
	if p := runPod(t, cs, ns, claimPod("writer", "", "src-volume",
		"mkdir -p /data/d && echo "+payload+" > /data/d/f && ln -s d/f /data/link")); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("writer: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	waitVolume(t, ks, ns, "src", "bound", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" })
	if _, err := ks.Backups(ns).Create(ctx, &v1alpha1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "src-once"},
		Spec: v1alpha1.BackupSpec{Source: v1alpha1.BackupSource{Kind: "Volume", Name: "src"},
			Target: v1alpha1.BackupTarget{Bucket: "vault"}, DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := waitBackupArchive(t, ks, ns, "src-once")

	if _, err := ks.Volumes(ns).Create(ctx, restoring("copy", "src-once"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := waitVolume(t, ks, ns, "copy", "Active", active)
	if r := v.Status.Restored; r == nil || r.Backup != "src-once" || r.Archive != run.Archive {
		t.Fatalf("status.restored %+v, want Backup src-once archive %s", v.Status.Restored, run.Archive)
	}
	if c := condition(v, "Ready"); c.Status != metav1.ConditionTrue || c.Reason != "Restored" || !strings.Contains(c.Message, run.Archive) {
		t.Fatalf("Ready condition %+v, want True, reason Restored, naming the archive", c)
	}
	if v.Status.Node != nodeName || v.Status.VolumeName == "" {
		t.Fatalf("restored Volume on node %q, volume %q; want bound on %s", v.Status.Node, v.Status.VolumeName, nodeName)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "copy-volume", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, held := pvc.Annotations[v1alpha1.AnnotationRestoring]; held || pvc.Annotations["volume.kubernetes.io/selected-node"] != nodeName {
		t.Fatalf("claim annotations after the restore: %v", pvc.Annotations)
	}
	p := runPod(t, cs, ns, claimPod("reader", "", "copy-volume",
		`test "$(cat /data/d/f)" = `+payload+` && test "$(cat /data/link)" = `+payload+` && echo new > /data/d/f`))
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("reader of the restored Volume: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}

	// restoreFrom is immutable: changing the archive or dropping it is refused.
	cur, err := ks.Volumes(ns).Get(ctx, "copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := cur.DeepCopy()
	changed.Spec.RestoreFrom.Archive = run.Archive + ".other"
	if _, err := ks.Volumes(ns).Update(ctx, changed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.restoreFrom") {
		t.Errorf("restoreFrom changed: %v, want 422 on spec.restoreFrom", err)
	}
	dropped := cur.DeepCopy()
	dropped.Spec.RestoreFrom = nil
	if _, err := ks.Volumes(ns).Update(ctx, dropped, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("restoreFrom dropped: %v, want 422 (immutable)", err)
	}
	// Restored once: a new archive of the Backup does not land on the Volume's new data.
	grown := cur.DeepCopy()
	grown.Spec.Size.Add(grown.Spec.Size) // any spec change reconciles it
	if _, err := ks.Volumes(ns).Update(ctx, grown, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVolume(t, ks, ns, "copy", "Active at 32Mi", func(v *v1alpha1.Volume) bool {
		return active(v) && v.Status.Capacity != nil && v.Status.Capacity.Cmp(grown.Spec.Size) == 0
	})
	if p := runPod(t, cs, ns, claimPod("reader2", "", "copy-volume", `test "$(cat /data/d/f)" = new`)); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the restored Volume's new data was overwritten: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	// The Backup is no dependency of the restored Volume any more: it can be deleted.
	if err := ks.Backups(ns).Delete(ctx, "src-once", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, time.Minute, 250*time.Millisecond, func() error {
		if _, err := ks.Backups(ns).Get(ctx, "src-once", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("backup src-once still there (%v)", err)
		}
		return nil
	})
}

// TestVolumeRestoreWaits: a Volume restoring from a Backup that does not exist waits with
// DependenciesReady False naming it; from a Backup with no archive yet it is Reconciling
// (BackupNotReady) and its claim, already bound, is held back from pods (FailedMount) —
// no pod sees the Volume before its restore.
func TestVolumeRestoreWaits(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Volumes(ns).Create(ctx, restoring("orphan", "nosuch"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := waitVolume(t, ks, ns, "orphan", "waiting for its Backup", func(v *v1alpha1.Volume) bool {
		c := condition(v, "DependenciesReady")
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "Backup/"+ns+"/nosuch")
	})
	if v.Status.Phase == "Active" || v.Status.ClaimName != "" {
		t.Fatalf("Volume without its Backup: phase %s, claim %q", v.Status.Phase, v.Status.ClaimName)
	}

	if _, err := ks.Buckets(ns).Create(ctx, &v1alpha1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: "vault"},
		Spec: v1alpha1.BucketSpec{DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Volumes(ns).Create(ctx, newVolume("src", "16Mi", v1alpha1.DeletionDelete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Yearly: Active (scheduled) with no archive for the test's whole life.
	if _, err := ks.Backups(ns).Create(ctx, &v1alpha1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "yearly"},
		Spec: v1alpha1.BackupSpec{Source: v1alpha1.BackupSource{Kind: "Volume", Name: "src"}, Schedule: "0 0 1 1 *",
			Target: v1alpha1.BackupTarget{Bucket: "vault"}, DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Volumes(ns).Create(ctx, restoring("early", "yearly"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v = waitVolume(t, ks, ns, "early", "Reconciling: BackupNotReady", func(v *v1alpha1.Volume) bool {
		c := condition(v, "Reconciling")
		return v.Status.Phase == "Reconciling" && c.Reason == "BackupNotReady" && strings.Contains(c.Message, "Backup yearly has no successful archive yet")
	})
	if v.Status.Restored != nil || v.Status.VolumeName == "" || v.Status.Node != nodeName {
		t.Fatalf("Volume waiting for an archive: %+v (want bound on %s, not restored)", v.Status, nodeName)
	}
	pod := claimPod("early-user", "", "early-volume", "true")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, cs, ns, "early-user", "FailedMount", `is being restored from Backup "yearly"`)
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "early-user", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Fatalf("a pod used a Volume before its restore: phase %s", p.Status.Phase)
	}

	// The orphan's Backup appears and archives src: the orphan is restored.
	if p := runPod(t, cs, ns, claimPod("writer", "", "src-volume", "echo late > /data/f")); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("writer: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	waitVolume(t, ks, ns, "src", "bound", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" })
	if _, err := ks.Backups(ns).Create(ctx, &v1alpha1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nosuch"},
		Spec: v1alpha1.BackupSpec{Source: v1alpha1.BackupSource{Kind: "Volume", Name: "src"},
			Target: v1alpha1.BackupTarget{Bucket: "vault"}, DeletionPolicy: v1alpha1.DeletionDelete}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := waitBackupArchive(t, ks, ns, "nosuch")
	v = waitVolume(t, ks, ns, "orphan", "Active", active)
	if v.Status.Restored == nil || v.Status.Restored.Archive != run.Archive || condition(v, "Ready").Reason != "Restored" {
		t.Fatalf("orphan once its Backup archived: %+v", v.Status)
	}
	if p := runPod(t, cs, ns, claimPod("reader", "", "orphan-volume", `test "$(cat /data/f)" = late`)); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("reader of the orphan: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
}

// TestVolumeRestoreRefused: restoreFrom a Backup of another kind and restoreFrom on a
// perReplica Volume are refused with 422.
func TestVolumeRestoreRefused(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Backups(ns).Create(ctx, &v1alpha1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "db-nightly"},
		Spec: v1alpha1.BackupSpec{Source: v1alpha1.BackupSource{Kind: "Database", Name: "orders"}, Schedule: "0 3 * * *",
			Target: v1alpha1.BackupTarget{Bucket: "vault"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission reads Backups from its informer cache, which may not hold the Backup just
	// created: a Volume admitted meanwhile is deleted and a new name tried, until the
	// cache has it (the driver would fail that Volume terminally in any case).
	var err error
	for i, deadline := 0, time.Now().Add(30*time.Second); time.Now().Before(deadline); i++ {
		name := fmt.Sprintf("wrong-%d", i)
		if _, err = ks.Volumes(ns).Create(ctx, restoring(name, "db-nightly"), metav1.CreateOptions{}); err != nil {
			break
		}
		_ = ks.Volumes(ns).Delete(ctx, name, metav1.DeleteOptions{})
		time.Sleep(100 * time.Millisecond)
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "backs up a Database") {
		t.Errorf("restore from a Backup of a Database: %v, want 422", err)
	}
	per := restoring("per", "db-nightly")
	per.Spec.PerReplica = true
	if _, err := ks.Volumes(ns).Create(ctx, per, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "perReplica") {
		t.Errorf("perReplica restore: %v, want 422", err)
	}
}
