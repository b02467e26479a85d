package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func TestVolumePath(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "u1"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"}}}
	affinity := func(host string) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}}}}
	}
	pv := func(f func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		p := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "u1"},
			NodeAffinity:           affinity("n1"),
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/d/pv1"}}}}
		if f != nil {
			f(p)
		}
		return p
	}
	for _, tc := range []struct {
		name, want, err string
		pv              *corev1.PersistentVolume
	}{
		{name: "local on this node", pv: pv(nil), want: "/d/pv1"},
		{name: "hostPath without affinity", pv: pv(func(p *corev1.PersistentVolume) {
			p.Spec.NodeAffinity = nil
			p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/h"}}
		}), want: "/h"},
		{name: "another node's", pv: pv(func(p *corev1.PersistentVolume) { p.Spec.NodeAffinity = affinity("n2") }), err: "belongs to another node"},
		{name: "bound to another claim", pv: pv(func(p *corev1.PersistentVolume) { p.Spec.ClaimRef.UID = "u2" }), err: "not bound to claim"},
		{name: "no claimRef", pv: pv(func(p *corev1.PersistentVolume) { p.Spec.ClaimRef = nil }), err: "not bound to claim"},
		{name: "unsupported source", pv: pv(func(p *corev1.PersistentVolume) {
			p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}
		}), err: "only local and hostPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := volumePath(claim, tc.pv, node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("volumePath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestClaimBound(t *testing.T) {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}}
	if err := claimBound(c); err == nil || !strings.Contains(err.Error(), "not bound") {
		t.Errorf("pending claim: %v", err)
	}
	c.Spec.VolumeName, c.Status.Phase = "pv1", corev1.ClaimBound
	if err := claimBound(c); err != nil {
		t.Errorf("bound claim: %v", err)
	}
	c.Annotations = map[string]string{v1alpha1.AnnotationRestoring: "nightly"}
	if err := claimBound(c); err == nil || !strings.Contains(err.Error(), `restored from Backup "nightly"`) {
		t.Errorf("claim being restored: %v", err)
	}
	c.Annotations = nil
	c.DeletionTimestamp = &metav1.Time{}
	if err := claimBound(c); err == nil {
		t.Error("deleted claim accepted")
	}
}
