package platform

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func readyNode(name string, f func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if f != nil {
		f(&n)
	}
	return n
}

func TestRestoreNode(t *testing.T) {
	notReady := readyNode("not-ready", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
	noCondition := readyNode("unknown", func(n *corev1.Node) { n.Status.Conditions = nil })
	cordoned := readyNode("cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	tainted := readyNode("tainted", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	})
	preferNo := readyNode("prefer-no", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}
	})
	sim := readyNode("sim", func(n *corev1.Node) { n.Annotations = map[string]string{simNodeAnnotation: "true"} })
	if _, ok := restoreNode([]corev1.Node{notReady, noCondition, cordoned, tainted, sim}, "ns/v"); ok {
		t.Fatal("a node was chosen among nodes none of which qualifies")
	}
	if n, ok := restoreNode([]corev1.Node{notReady, preferNo, sim}, "ns/v"); !ok || n != "prefer-no" {
		t.Fatalf("restoreNode = %q, %v; want prefer-no", n, ok)
	}
	// Stable whatever the order, and spread over the candidates.
	nodes := []corev1.Node{readyNode("a", nil), readyNode("b", nil), readyNode("c", nil)}
	rev := []corev1.Node{nodes[2], nodes[1], nodes[0]}
	chosen := map[string]bool{}
	for i := range 30 {
		key := "ns/v" + strings.Repeat("x", i)
		n1, _ := restoreNode(nodes, key)
		n2, _ := restoreNode(rev, key)
		if n1 != n2 {
			t.Fatalf("%s: %s in one order, %s in the other", key, n1, n2)
		}
		chosen[n1] = true
	}
	if len(chosen) < 2 {
		t.Errorf("30 Volumes all on %v", chosen)
	}
}

func TestDecideRestore(t *testing.T) {
	restoring := func(f func(*v1alpha1.Volume)) *v1alpha1.Volume {
		return vol("1Gi", func(v *v1alpha1.Volume) {
			v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b"}
			if f != nil {
				f(v)
			}
		})
	}
	done := func(v *v1alpha1.Volume) {
		v.Status.Restored = &v1alpha1.VolumeRestored{Backup: "b", Archive: "ns/b/1.tar.gz"}
	}
	claim := func(bound, held bool) *corev1.PersistentVolumeClaim {
		c := desiredClaim(vol("1Gi", nil))
		if bound {
			c.Spec.VolumeName, c.Status.Phase = "pv1", corev1.ClaimBound
		}
		if held {
			c.Annotations = map[string]string{v1alpha1.AnnotationRestoring: "b"}
		}
		return c
	}
	deleting := claim(true, true)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name string
		v    *v1alpha1.Volume
		pvc  *corev1.PersistentVolumeClaim
		want restoreStep
	}{
		{name: "no restoreFrom", v: vol("1Gi", nil), pvc: claim(true, false), want: restoreNone},
		{name: "perReplica", v: restoring(func(v *v1alpha1.Volume) { v.Spec.PerReplica = true }), want: restoreNone},
		{name: "no claim yet", v: restoring(nil), want: restoreWaitClaim},
		{name: "claim pending", v: restoring(nil), pvc: claim(false, true), want: restoreWaitClaim},
		{name: "claim deleting", v: restoring(nil), pvc: deleting, want: restoreWaitClaim},
		{name: "claim bound", v: restoring(nil), pvc: claim(true, true), want: restoreRun},
		{name: "restored, claim held", v: restoring(done), pvc: claim(true, true), want: restoreRelease},
		// Restore once: a restored Volume is never restored again, whatever its claim.
		{name: "restored, released", v: restoring(done), pvc: claim(true, false), want: restoreNone},
		{name: "restored, claim gone", v: restoring(done), want: restoreNone},
		{name: "restored, claim recreated", v: restoring(done), pvc: claim(false, false), want: restoreNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideRestore(tc.v, tc.pvc); got != tc.want {
				t.Fatalf("decideRestore = %d, want %d", got, tc.want)
			}
		})
	}
	if deps := volumeDependencies(restoring(nil)); len(deps) != 1 || deps[0] != (lifecycle.Ref{Kind: "Backup", Namespace: "ns", Name: "b"}) {
		t.Errorf("dependencies before the restore: %v", deps)
	}
	if deps := volumeDependencies(restoring(done)); len(deps) != 0 {
		t.Errorf("dependencies after the restore: %v (the Backup must be free to go)", deps)
	}
}

// countingRestorer counts the archives unpacked.
type countingRestorer struct{ n int }

func (r *countingRestorer) RestoreVolume(_ context.Context, _ *v1alpha1.Volume, rd io.Reader) error {
	if _, err := io.Copy(io.Discard, rd); err != nil {
		return err
	}
	r.n++
	return nil
}

// restoreFixture is a Volume driver over a fake API holding a Volume "data" restoring from
// Backup "nightly", one agent node, one simulated node and the local-path class.
type restoreFixture struct {
	t        *testing.T
	c        client.Client
	d        *volumeDriver
	files    *countingRestorer
	opened   []string
	v        *v1alpha1.Volume
	backup   *v1alpha1.Backup
	lastSeen lifecycle.Outcome
}

func newRestoreFixture(t *testing.T) *restoreFixture {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	b := &v1alpha1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Spec:   v1alpha1.BackupSpec{Source: v1alpha1.BackupSource{Kind: "Volume", Name: "old"}, Target: v1alpha1.BackupTarget{Bucket: "vault"}},
		Status: v1alpha1.BackupStatus{LastSuccessful: &v1alpha1.BackupRun{Archive: "ns/nightly/1.tar.gz"}}}
	v := vol("1Gi", func(v *v1alpha1.Volume) {
		v.Name, v.UID = "data", "uid-data"
		v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "nightly"}
	})
	sim := readyNode("sim", func(n *corev1.Node) { n.Annotations = map[string]string{simNodeAnnotation: "true"} })
	agentNode := readyNode("agent", nil)
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: localPathProvisioner}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(b, v.DeepCopy(), &sim, &agentNode, class).
		WithStatusSubresource(&v1alpha1.Backup{}, &v1alpha1.Volume{}, &corev1.PersistentVolumeClaim{}).Build()
	f := &restoreFixture{t: t, c: c, files: &countingRestorer{}, v: v, backup: b}
	f.d = &volumeDriver{o: Options{Client: c, Now: func() time.Time { return now }}, files: f.files,
		openArchive: func(_ context.Context, _ Options, ns, backup, archive string) (string, io.ReadCloser, error) {
			f.opened = append(f.opened, archive)
			return "Volume", io.NopCloser(strings.NewReader("a gzipped tar")), nil
		}}
	return f
}

// pass is one reconcile of the engine's pipeline: Observe, then Provision or Update.
func (f *restoreFixture) pass() lifecycle.Outcome {
	f.t.Helper()
	ctx := context.Background()
	seen, err := f.d.Observe(ctx, f.v)
	if err != nil {
		f.t.Fatal(err)
	}
	out := seen
	switch lifecycle.Decide(seen, false) {
	case lifecycle.ActionProvision:
		out, err = f.d.Provision(ctx, f.v)
	case lifecycle.ActionUpdate:
		out, err = f.d.Update(ctx, f.v)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.lastSeen = seen
	return out
}

func (f *restoreFixture) claim() *corev1.PersistentVolumeClaim {
	f.t.Helper()
	var pvc corev1.PersistentVolumeClaim
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "data-volume"}, &pvc); err != nil {
		f.t.Fatal(err)
	}
	return &pvc
}

// bind does what the provisioner and the binder do for the claim.
func (f *restoreFixture) bind() {
	f.t.Helper()
	ctx := context.Background()
	pvc := f.claim()
	pvc.Spec.VolumeName = "pv-data"
	if err := f.c.Update(ctx, pvc); err != nil {
		f.t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: f.v.Spec.Size}
	if err := f.c.Status().Update(ctx, pvc); err != nil {
		f.t.Fatal(err)
	}
}

func TestVolumeRestoreOnce(t *testing.T) {
	f := newRestoreFixture(t)
	ctx := context.Background()

	out := f.pass()
	if out.Phase != lifecycle.PhaseReconciling || out.Reason != "WaitingForClaim" {
		t.Fatalf("after Provision: %+v", out)
	}
	pvc := f.claim()
	if pvc.Annotations["volume.kubernetes.io/selected-node"] != "agent" || pvc.Annotations[v1alpha1.AnnotationRestoring] != "nightly" {
		t.Fatalf("claim annotations %v: want pre-bound to the agent node and held back", pvc.Annotations)
	}
	if out := f.pass(); out.Phase != lifecycle.PhaseReconciling || out.Reason != "WaitingForClaim" || f.files.n != 0 {
		t.Fatalf("unbound claim: %+v, %d restores", out, f.files.n)
	}

	f.bind()
	out = f.pass()
	if f.files.n != 1 || len(f.opened) != 1 || f.opened[0] != "ns/nightly/1.tar.gz" {
		t.Fatalf("bound claim: %d restores of %v", f.files.n, f.opened)
	}
	if out.Phase != lifecycle.PhaseReconciling || out.Reason != "Restored" || f.v.Status.Restored == nil || f.v.Status.Restored.Archive != "ns/nightly/1.tar.gz" {
		t.Fatalf("after the restore: %+v, status %+v", out, f.v.Status.Restored)
	}
	if f.claim().Annotations[v1alpha1.AnnotationRestoring] == "" {
		t.Fatal("the claim was released to pods before status.restored was stored")
	}

	// The status write was lost (a restart, a conflict): the same archive is unpacked again
	// while pods are still held back, and nothing else happens.
	lost := f.v.DeepCopy()
	lost.Status.Restored = nil
	f.v = lost
	f.pass()
	if f.files.n != 2 || f.claim().Annotations[v1alpha1.AnnotationRestoring] == "" {
		t.Fatalf("after a lost status write: %d restores, claim %v", f.files.n, f.claim().Annotations)
	}

	// Stored: the claim is released, the Volume is Active (Restored).
	out = f.pass()
	if _, held := f.claim().Annotations[v1alpha1.AnnotationRestoring]; held {
		t.Fatal("the claim is still held back after the restore was recorded")
	}
	if out.Phase != "" || out.Reason != "Restored" || !f.lastSeen.UpToDate || !strings.Contains(out.Message, "Backup nightly") {
		t.Fatalf("restored Volume: %+v", out)
	}

	// Restore once: a new archive of the Backup, reconciles after a restart, the claim
	// recreated behind the platform's back — none unpacks an archive again.
	f.backup.Status.LastSuccessful = &v1alpha1.BackupRun{Archive: "ns/nightly/2.tar.gz"}
	if err := f.c.Status().Update(ctx, f.backup); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.pass()
	}
	if err := f.c.Delete(ctx, f.claim()); err != nil {
		t.Fatal(err)
	}
	out = f.pass()
	if out.Reason != "ClaimCreated" {
		t.Fatalf("claim recreated: %+v", out)
	}
	if a := f.claim().Annotations; a[v1alpha1.AnnotationRestoring] != "" || a["volume.kubernetes.io/selected-node"] != "" {
		t.Fatalf("the recreated claim of a restored Volume is held or pre-bound: %v", a)
	}
	f.bind()
	for range 3 {
		f.pass()
	}
	if f.files.n != 2 || len(f.opened) != 2 {
		t.Fatalf("a restored Volume was restored again: %d restores of %v", f.files.n, f.opened)
	}
}

func TestVolumeRestoreWaits(t *testing.T) {
	ctx := context.Background()
	t.Run("no successful archive", func(t *testing.T) {
		f := newRestoreFixture(t)
		f.backup.Status.LastSuccessful = nil
		f.backup.Status.LastFailure = &v1alpha1.BackupFailure{Error: "agent unreachable"}
		if err := f.c.Status().Update(ctx, f.backup); err != nil {
			t.Fatal(err)
		}
		f.pass()
		f.bind()
		out := f.pass()
		if out.Phase != lifecycle.PhaseReconciling || out.Reason != "BackupNotReady" || !strings.Contains(out.Message, "no successful archive") ||
			!strings.Contains(out.Message, "agent unreachable") || f.files.n != 0 || f.v.Status.Restored != nil {
			t.Fatalf("Backup without an archive: %+v, %d restores", out, f.files.n)
		}
		f.backup.Status.LastSuccessful = &v1alpha1.BackupRun{Archive: "ns/nightly/3.tar.gz"}
		if err := f.c.Status().Update(ctx, f.backup); err != nil {
			t.Fatal(err)
		}
		if f.pass(); f.files.n != 1 || f.v.Status.Restored == nil || f.v.Status.Restored.Archive != "ns/nightly/3.tar.gz" {
			t.Fatalf("once the Backup has an archive: %d restores, %+v", f.files.n, f.v.Status.Restored)
		}
	})
	t.Run("named archive", func(t *testing.T) {
		f := newRestoreFixture(t)
		f.v.Spec.RestoreFrom.Archive = "ns/nightly/0.tar.gz"
		f.pass()
		f.bind()
		if f.pass(); len(f.opened) != 1 || f.opened[0] != "ns/nightly/0.tar.gz" {
			t.Fatalf("opened %v, want the named archive", f.opened)
		}
	})
	t.Run("backup of another kind", func(t *testing.T) {
		f := newRestoreFixture(t)
		f.backup.Spec.Source.Kind = "Database"
		if err := f.c.Update(ctx, f.backup); err != nil {
			t.Fatal(err)
		}
		f.pass()
		f.bind()
		if out := f.pass(); out.Terminal == nil || out.Reason != "BackupOfAnotherKind" || f.files.n != 0 {
			t.Fatalf("Backup of a Database: %+v", out)
		}
	})
	t.Run("another provisioner", func(t *testing.T) {
		f := newRestoreFixture(t)
		f.v.Spec.StorageClass = "nfs"
		if err := f.c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Provisioner: "nfs.csi.k8s.io"}); err != nil {
			t.Fatal(err)
		}
		if out := f.pass(); out.Terminal == nil || out.Reason != "RestoreNeedsLocalPath" {
			t.Fatalf("class of another provisioner: %+v", out)
		}
	})
	t.Run("selected node lost before binding", func(t *testing.T) {
		f := newRestoreFixture(t)
		f.pass()
		if n := f.claim().Annotations["volume.kubernetes.io/selected-node"]; n != "agent" {
			t.Fatalf("selected node %q", n)
		}
		other := readyNode("other", nil)
		if err := f.c.Create(ctx, &other); err != nil {
			t.Fatal(err)
		}
		var agent corev1.Node
		if err := f.c.Get(ctx, client.ObjectKey{Name: "agent"}, &agent); err != nil {
			t.Fatal(err)
		}
		agent.Spec.Unschedulable = true
		if err := f.c.Update(ctx, &agent); err != nil {
			t.Fatal(err)
		}
		if out := f.pass(); out.Reason != "NodeUnavailable" || out.Phase != lifecycle.PhaseReconciling {
			t.Fatalf("claim pre-bound to a cordoned node: %+v", out)
		}
		f.pass()
		if n := f.claim().Annotations["volume.kubernetes.io/selected-node"]; n != "other" {
			t.Fatalf("claim made again on %q, want other", n)
		}
		// A bound claim stays where it is, whatever its node.
		f.bind()
		other.Spec.Unschedulable = true
		if err := f.c.Update(ctx, &other); err != nil {
			t.Fatal(err)
		}
		if f.pass(); f.files.n != 1 {
			t.Fatalf("bound claim on a cordoned node: %d restores", f.files.n)
		}
	})
	t.Run("no agent node", func(t *testing.T) {
		f := newRestoreFixture(t)
		if err := f.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}); err != nil {
			t.Fatal(err)
		}
		if out := f.pass(); out.Phase != lifecycle.PhaseReconciling || out.Reason != "NoNodeForRestore" {
			t.Fatalf("only a simulated node: %+v", out)
		}
	})
}
