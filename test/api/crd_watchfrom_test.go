package api

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchFromCreateRevision is the fixture every conformance CRD test uses: create an
// instance of a new CRD, delete it, then watch from the create's resourceVersion — the
// DELETED must arrive (it used to answer 410 "too old resource version", because the
// resource's watch cache started with the first watch, after both writes).
func TestWatchFromCreateRevision(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, simpleCRD(t, "watchfrom.example.com", "marks", "Mark"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "marks.watchfrom.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	client := dyn.Resource(schema.GroupVersionResource{Group: "watchfrom.example.com", Version: "v1", Resource: "marks"}).Namespace("default")
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "watchfrom.example.com/v1", "kind": "Mark",
		"metadata": map[string]any{"name": "m"}, "spec": map[string]any{}}}
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Delete(ctx, "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Deleted {
			t.Fatalf("first event %s %v, want DELETED", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no event")
	}
}
