package platform

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestOwnerMapEcho: the event of the version the driver's own apply answered reconciles
// nothing (the applying pass read the answer); any other version of the object does, and
// a no-op apply (the live version answered again) is not taken for a new write.
func TestOwnerMapEcho(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	r := &componentReads{direct: fake.NewClientBuilder().WithScheme(s).Build()}
	dep := func(rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Component", Name: "web",
				UID: "u", Controller: ptr.To(true)}}}}
	}
	r.applied("", dep("5"))
	if got := r.ownerMap(t.Context(), dep("5")); len(got) != 0 {
		t.Fatalf("the apply's own event reconciled %v", got)
	}
	if got := r.ownerMap(t.Context(), dep("5")); len(got) != 1 {
		t.Fatalf("a second event of version 5 (a relist) reconciled %v, want the Component", got)
	}
	if got := r.ownerMap(t.Context(), dep("6")); len(got) != 1 || got[0].Name != "web" {
		t.Fatalf("a later version reconciled %v, want the Component", got)
	}
	r.applied("6", dep("6")) // a no-op apply
	if got := r.ownerMap(t.Context(), dep("6")); len(got) != 1 {
		t.Fatalf("after a no-op apply, an event of the live version reconciled %v, want the Component", got)
	}
	if v, _ := r.seen.Load(componentKey(appsv1.SchemeGroupVersion.WithKind("Deployment"), "ns", "web")); v != "6" {
		t.Fatalf("recorded version %v, want 6 (echoes are recorded too)", v)
	}
}
