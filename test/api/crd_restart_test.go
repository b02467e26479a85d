package api

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestServedRightAfterRestart: once a restarted server says it is ready, its CRDs are served
// at once — a client with cached discovery (kubectl, informers) gets no 404 in between.
func TestServedRightAfterRestart(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	crd := simpleCRD(t, "restart.example.com", "gadgets", "Gadget")
	ctx := ctxT(t, time.Minute)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, crd.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gvr := schema.GroupVersionResource{Group: "restart.example.com", Version: crd.Spec.Versions[0].Name, Resource: "gadgets"}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Gadget", "metadata": map[string]any{"name": "g1"}}}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crdSrv.Restart(); err != nil { // returns when the server reports ready
		t.Fatal(err)
	}
	_, dyn, _ = clients(t)
	list, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("first list after the restart: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "g1" {
		t.Fatalf("after the restart: %d items", len(list.Items))
	}
}
