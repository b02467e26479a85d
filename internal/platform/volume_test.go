package platform

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func vol(size string, f func(*v1alpha1.Volume)) *v1alpha1.Volume {
	v := &v1alpha1.Volume{Spec: v1alpha1.VolumeSpec{Size: resource.MustParse(size)}}
	v.Name, v.Namespace = "data", "ns"
	if f != nil {
		f(v)
	}
	return v
}

func TestVolumeSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v, old   *v1alpha1.Volume
		wantPath string // "" = valid
	}{
		{name: "create", v: vol("1Gi", nil)},
		{name: "grow", v: vol("2Gi", nil), old: vol("1Gi", nil)},
		{name: "same", v: vol("1024Mi", nil), old: vol("1Gi", nil)},
		{name: "shrink", v: vol("500Mi", nil), old: vol("1Gi", nil), wantPath: "spec.size"},
		{name: "zero", v: vol("0", nil), wantPath: "spec.size"},
		{name: "bad access mode", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.AccessMode = "Sometimes" }), wantPath: "spec.accessMode"},
		{name: "bad policy", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.DeletionPolicy = "DeleteIfEmpty" }), wantPath: "spec.deletionPolicy"},
		{name: "class change", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.StorageClass = "fast" }), old: vol("1Gi", nil), wantPath: "spec.storageClass"},
		{name: "explicit default class", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.StorageClass = v1alpha1.LocalPathClass }), old: vol("1Gi", nil)},
		{name: "perReplica change", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.PerReplica = true }), old: vol("1Gi", nil), wantPath: "spec.perReplica"},
		{name: "restoreFrom", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b"} })},
		{name: "restoreFrom kept", v: vol("2Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b"} }),
			old: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b"} })},
		{name: "restoreFrom without backup", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{} }), wantPath: "spec.restoreFrom.backup"},
		{name: "restoreFrom perReplica", v: vol("1Gi", func(v *v1alpha1.Volume) {
			v.Spec.RestoreFrom, v.Spec.PerReplica = &v1alpha1.RestoreFrom{Backup: "b"}, true
		}), wantPath: "spec.restoreFrom"},
		{name: "restoreFrom added", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b"} }),
			old: vol("1Gi", nil), wantPath: "spec.restoreFrom"},
		{name: "restoreFrom removed", v: vol("1Gi", nil),
			old: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b"} }), wantPath: "spec.restoreFrom"},
		{name: "restoreFrom archive changed", v: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b", Archive: "ns/b/2"} }),
			old: vol("1Gi", func(v *v1alpha1.Volume) { v.Spec.RestoreFrom = &v1alpha1.RestoreFrom{Backup: "b", Archive: "ns/b/1"} }), wantPath: "spec.restoreFrom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := volumeSpecErrors(tc.v, tc.old)
			if tc.wantPath == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.wantPath {
				t.Fatalf("errors %v, want one on %s", errs, tc.wantPath)
			}
		})
	}
}

func TestObserveClaim(t *testing.T) {
	claim := func(req, capacity string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		c := desiredClaim(vol(req, nil))
		c.Status.Phase = phase
		if capacity != "" {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		v        *v1alpha1.Volume
		pvc      *corev1.PersistentVolumeClaim
		upToDate bool
		recreate bool
		reason   string
		phase    lifecycle.Phase
	}{
		{name: "bound", v: vol("1Gi", nil), pvc: claim("1Gi", "1Gi", corev1.ClaimBound), upToDate: true, reason: "Bound"},
		{name: "pending", v: vol("1Gi", nil), pvc: claim("1Gi", "", corev1.ClaimPending), upToDate: true, reason: "WaitingForFirstConsumer"},
		{name: "pending at another size", v: vol("2Gi", nil), pvc: claim("1Gi", "", corev1.ClaimPending), recreate: true},
		{name: "bound, grown spec", v: vol("2Gi", nil), pvc: claim("1Gi", "1Gi", corev1.ClaimBound)},
		{name: "bound, resizing", v: vol("2Gi", nil), pvc: claim("2Gi", "1Gi", corev1.ClaimBound), upToDate: true, reason: "Resizing", phase: lifecycle.PhaseReconciling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := observeClaim(tc.v, tc.pvc)
			if st.upToDate != tc.upToDate || st.recreate != tc.recreate || st.outcome.Reason != tc.reason || st.outcome.Phase != tc.phase {
				t.Fatalf("observeClaim = %+v", st)
			}
		})
	}
	c := desiredClaim(vol("1Gi", func(v *v1alpha1.Volume) { v.UID = "u" }))
	if c.Name != "data-volume" || *c.Spec.StorageClassName != "local-path" || c.Spec.AccessModes[0] != corev1.ReadWriteOnce ||
		c.Labels["kubeos.dev/volume"] != "data" || c.Labels["app.kubernetes.io/managed-by"] != "kube" || !strings.Contains(c.OwnerReferences[0].Kind, "Volume") {
		t.Errorf("desiredClaim = %+v", c)
	}
}
