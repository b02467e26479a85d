package api

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// TestDynamicInformer: a client-go dynamic informer on a custom resource (streaming list,
// on by default in client-go 0.37) syncs and sees adds, updates and deletes.
func TestDynamicInformer(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, simpleCRD(t, "informer.example.com", "probes", "Probe"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "probes.informer.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gvr := schema.GroupVersionResource{Group: "informer.example.com", Version: "v1", Resource: "probes"}
	client := dyn.Resource(gvr).Namespace("default")
	mk := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "informer.example.com/v1", "kind": "Probe",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"n": int64(1)}}}
	}
	if _, err := client.Create(ctx, mk("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events := make(chan string, 100)
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(gvr).Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { events <- "add " + o.(*unstructured.Unstructured).GetName() },
		UpdateFunc: func(_, o any) { events <- "update " + o.(*unstructured.Unstructured).GetName() },
		DeleteFunc: func(o any) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				events <- "delete " + u.GetName()
			}
		},
	})
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	syncCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("dynamic informer on a custom resource did not sync within 15 s")
	}
	expect := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e := <-events:
				if e == want {
					return
				}
			case <-deadline:
				t.Fatalf("no %q event within 10 s", want)
			}
		}
	}
	expect("add before")
	if _, err := client.Create(ctx, mk("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("add after")
	obj, err := client.Get(ctx, "after", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(obj.Object, int64(2), "spec", "n")
	if _, err := client.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("update after")
	if err := client.Delete(ctx, "after", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete after")
}
