package garbagecollector

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ref(uid string, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: uid, UID: types.UID(uid), BlockOwnerDeletion: &block}
}

func TestDecide(t *testing.T) {
	withFinalizer := func(f string) *node { return &node{finalizers: []string{f}} }
	tests := []struct {
		name          string
		refs          []metav1.OwnerReference
		states        []ownerState
		hasDependents bool
		own           *node
		want          verdict
	}{
		{"solid owner keeps it", []metav1.OwnerReference{ref("a", true)}, []ownerState{ownerSolid}, false, nil, verdict{}},
		{"solid owner, dangling and waiting ones stripped", []metav1.OwnerReference{ref("a", true), ref("b", true), ref("c", true)},
			[]ownerState{ownerDangling, ownerSolid, ownerWaiting}, false, nil, verdict{strip: []types.UID{"a", "c"}}},
		{"dangling owner: background delete", []metav1.OwnerReference{ref("a", true)}, []ownerState{ownerDangling}, false, nil,
			verdict{delete: true, policy: metav1.DeletePropagationBackground}},
		{"waiting owner, leaf dependent: background delete", []metav1.OwnerReference{ref("a", true)}, []ownerState{ownerWaiting}, false, nil,
			verdict{delete: true, policy: metav1.DeletePropagationBackground}},
		{"waiting owner, dependent with dependents: unblock and foreground", []metav1.OwnerReference{ref("a", true), ref("b", false)},
			[]ownerState{ownerWaiting, ownerWaiting}, true, nil,
			verdict{delete: true, policy: metav1.DeletePropagationForeground, unblock: []types.UID{"a"}}},
		{"own orphan finalizer is honoured", []metav1.OwnerReference{ref("a", true)}, []ownerState{ownerDangling}, false, withFinalizer(finalizerOrphan),
			verdict{delete: true, policy: metav1.DeletePropagationOrphan}},
		{"own foreground finalizer is honoured", []metav1.OwnerReference{ref("a", true)}, []ownerState{ownerDangling}, false, withFinalizer(finalizerForeground),
			verdict{delete: true, policy: metav1.DeletePropagationForeground}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.refs, tt.states, tt.hasDependents, tt.own)
			if got.delete != tt.want.delete || got.policy != tt.want.policy || !slices.Equal(got.strip, tt.want.strip) || !slices.Equal(got.unblock, tt.want.unblock) {
				t.Fatalf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGraphIndexesDependents(t *testing.T) {
	g := newGraph()
	g.put(&node{uid: "owner", name: "owner"})
	g.put(&node{uid: "d1", owners: []metav1.OwnerReference{ref("owner", true)}})
	g.put(&node{uid: "d2", owners: []metav1.OwnerReference{ref("owner", false)}})
	if n := len(g.dependentsOf("owner")); n != 2 {
		t.Fatalf("%d dependents, want 2", n)
	}
	if b := blockingDependents("owner", g.dependentsOf("owner")); len(b) != 1 || b[0].uid != "d1" {
		t.Fatalf("blocking dependents %v, want d1", b)
	}
	// An update that drops the reference unlinks it; removal unlinks the rest.
	g.put(&node{uid: "d1"})
	if n := len(g.dependentsOf("owner")); n != 1 {
		t.Fatalf("%d dependents after d1 dropped its reference, want 1", n)
	}
	g.remove("d2")
	if g.hasDependents("owner") {
		t.Fatal("owner still has dependents after d2 went")
	}
}
