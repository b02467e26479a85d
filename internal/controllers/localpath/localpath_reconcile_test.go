package localpath

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func class(name, provisioner string, expand bool, def bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, AllowVolumeExpansion: ptr.To(expand)}
	if def {
		sc.Annotations = map[string]string{annDefaultClass: "true"}
	}
	return sc
}

func TestDefaultClass(t *testing.T) {
	for _, tc := range []struct {
		name        string
		existing    []*storagev1.StorageClass
		create, def bool
	}{
		{name: "none", create: true, def: true},
		{name: "another non-default", existing: []*storagev1.StorageClass{class("fast", "x", false, false)}, create: true, def: true},
		{name: "another default", existing: []*storagev1.StorageClass{class("fast", "x", false, true)}, create: true, def: false},
		{name: "exists", existing: []*storagev1.StorageClass{class(ClassName, "other", false, false)}, create: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := defaultClass(tc.existing)
			if (sc != nil) != tc.create {
				t.Fatalf("create = %v, want %v", sc != nil, tc.create)
			}
			if sc == nil {
				return
			}
			if got := sc.Annotations[annDefaultClass] == "true"; got != tc.def {
				t.Errorf("default = %v, want %v", got, tc.def)
			}
			if sc.Provisioner != ProvisionerName || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
				!*sc.AllowVolumeExpansion || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
				t.Errorf("class = %+v", sc)
			}
		})
	}
}

func claim(size string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "u1", Annotations: map[string]string{}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(ClassName),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func bound(c *corev1.PersistentVolumeClaim) {
	c.Spec.VolumeName = "pvc-u1"
	c.Status.Phase = corev1.ClaimBound
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
}

func TestDecideClaim(t *testing.T) {
	lp := class(ClassName, ProvisionerName, true, true)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1-host"}}}
	selected := func(c *corev1.PersistentVolumeClaim) { c.Annotations[annSelectedNode] = "n1" }
	pv := newVolume(claim("1Gi", nil), lp, node, "/data/volumes/pvc-u1")
	grownPV := pv.DeepCopy()
	grownPV.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("2Gi")
	foreign := pv.DeepCopy()
	foreign.Annotations = nil
	for _, tc := range []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		class *storagev1.StorageClass
		pv    *corev1.PersistentVolume
		want  claimAction
		wait  bool
	}{
		{name: "no node chosen yet", claim: claim("1Gi", nil), class: lp, want: claimNone, wait: true},
		{name: "node chosen", claim: claim("1Gi", selected), class: lp, want: claimProvision},
		{name: "already provisioned", claim: claim("1Gi", selected), class: lp, pv: pv, want: claimNone},
		{name: "other provisioner's class", claim: claim("1Gi", selected), class: class("x", "other", true, false), want: claimNone},
		{name: "unknown class", claim: claim("1Gi", selected), want: claimNone},
		{name: "annotated for another provisioner", claim: claim("1Gi", func(c *corev1.PersistentVolumeClaim) {
			selected(c)
			c.Annotations[annStorageProvisioner] = "other"
		}), class: lp, want: claimNone},
		{name: "being deleted", claim: claim("1Gi", func(c *corev1.PersistentVolumeClaim) { selected(c); c.DeletionTimestamp = &metav1.Time{} }), class: lp, want: claimNone},
		{name: "bound, same size", claim: claim("1Gi", bound), class: lp, pv: pv, want: claimNone},
		{name: "bound, grown", claim: claim("2Gi", bound), class: lp, pv: pv, want: claimExpandPV},
		{name: "bound, grown, class without expansion", claim: claim("2Gi", bound), class: class(ClassName, ProvisionerName, false, false), pv: pv, want: claimNone, wait: true},
		{name: "PV grown, status not yet", claim: claim("2Gi", bound), class: lp, pv: grownPV, want: claimExpandStatus},
		{name: "bound to a PV of someone else", claim: claim("2Gi", bound), class: lp, pv: foreign, want: claimNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := decideClaim(tc.claim, tc.class, tc.pv)
			if got != tc.want || (why != "") != tc.wait {
				t.Errorf("decideClaim = %v %q, want %v (wait %v)", got, why, tc.want, tc.wait)
			}
		})
	}
}

func TestNewVolume(t *testing.T) {
	c := claim("3Gi", nil)
	lp := class(ClassName, ProvisionerName, true, true)
	lp.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1-host"}}}
	pv := newVolume(c, lp, node, "/d/pvc-u1")
	if pv.Name != "pvc-u1" || pv.Spec.Local.Path != "/d/pvc-u1" || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("pv = %+v", pv)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "3Gi" {
		t.Errorf("capacity %s", q.String())
	}
	if r := pv.Spec.ClaimRef; r.UID != "u1" || r.Name != "data" || r.Namespace != "ns" {
		t.Errorf("claimRef %+v", r)
	}
	e := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if e.Key != corev1.LabelHostname || e.Values[0] != "n1-host" {
		t.Errorf("affinity %+v", e)
	}
	if volumeNode(pv) != "n1" || !hasFinalizer(pv) || pv.Annotations[annProvisionedBy] != ProvisionerName {
		t.Errorf("node %q finalizer %v annotations %v", volumeNode(pv), hasFinalizer(pv), pv.Annotations)
	}
}

func TestDecideVolume(t *testing.T) {
	lp := class(ClassName, ProvisionerName, true, true)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	base := newVolume(claim("1Gi", nil), lp, node, "/d")
	with := func(f func(*corev1.PersistentVolume)) *corev1.PersistentVolume { p := base.DeepCopy(); f(p); return p }
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want volumeAction
	}{
		{name: "bound", pv: with(func(p *corev1.PersistentVolume) { p.Status.Phase = corev1.VolumeBound }), want: volumeNone},
		{name: "released, Delete", pv: with(func(p *corev1.PersistentVolume) { p.Status.Phase = corev1.VolumeReleased }), want: volumeCleanup},
		{name: "released, Retain", pv: with(func(p *corev1.PersistentVolume) {
			p.Status.Phase = corev1.VolumeReleased
			p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		}), want: volumeNone},
		{name: "deleted, Delete", pv: with(func(p *corev1.PersistentVolume) { p.DeletionTimestamp = &metav1.Time{} }), want: volumeCleanup},
		{name: "deleted, Retain", pv: with(func(p *corev1.PersistentVolume) {
			p.DeletionTimestamp = &metav1.Time{}
			p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		}), want: volumeDropFinalizer},
		{name: "finalizer already gone", pv: with(func(p *corev1.PersistentVolume) { p.Status.Phase = corev1.VolumeReleased; p.Finalizers = nil }), want: volumeNone},
		{name: "not ours", pv: with(func(p *corev1.PersistentVolume) { p.Status.Phase = corev1.VolumeReleased; p.Annotations = nil }), want: volumeNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideVolume(tc.pv); got != tc.want {
				t.Errorf("decideVolume = %v, want %v", got, tc.want)
			}
		})
	}
}
