package sharedinformers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// recorder is a controller's Service handler: the keys it was handed.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *recorder) handler() cache.ResourceEventHandler {
	add := func(obj any) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			panic(err)
		}
		r.mu.Lock()
		r.keys = append(r.keys, k)
		r.mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, cur any) { add(cur) }, DeleteFunc: add}
}

func (r *recorder) take() sets.Set[string] {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := sets.New(r.keys...)
	r.keys = nil
	return s
}

// TestSelectorMappedPodsQueueUpstreamsServices: for pod changes of every kind (created,
// deleted, a tombstone, labels changed with and without an endpoint change, nothing
// relevant changed) against Services with every selector shape (none, empty, one label,
// several, in two namespaces), the Services handed to the controller's Service handler are
// exactly those upstream's GetServicesToUpdate finds with the plain lister.
func TestSelectorMappedPodsQueueUpstreamsServices(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []string{"a", "b", "c"}
	keys := []string{"app", "tier", "example.com/x"}
	randomLabels := func(n int) map[string]string {
		if n < 0 {
			return nil
		}
		m := map[string]string{}
		for range n {
			m[keys[rng.IntN(len(keys))]] = vals[rng.IntN(len(vals))]
		}
		return m
	}
	var objs []runtime.Object
	for i := range 80 {
		var sel map[string]string
		switch i % 8 {
		case 0: // no selector: selects nothing
		case 1:
			sel = map[string]string{} // empty: every pod of the namespace
		default:
			sel = randomLabels(1 + rng.IntN(3))
		}
		objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: []string{"n1", "n2"}[i%2], Name: fmt.Sprintf("s-%d", i)},
			Spec: corev1.ServiceSpec{Selector: sel}})
	}
	cs := fake.NewSimpleClientset(objs...)
	f := informers.NewSharedInformerFactory(cs, 0)
	plain := f.Core().V1().Services().Lister()
	pods, services, err := SelectorMappedPods(f.Core().V1().Pods(), f.Core().V1().Services(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// What a controller's constructor does: a Service handler, then a pod handler (replaced).
	var rec recorder
	reg, err := services.Informer().AddEventHandler(rec.handler())
	if err != nil {
		t.Fatal(err)
	}
	upstreamPodHandlerCalled := false
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { upstreamPodHandlerCalled = true }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), reg.HasSynced)
	if n := rec.take().Len(); n != 80 {
		t.Fatalf("the Service handler saw %d Services, want 80", n)
	}

	m := pods.(mappedPods).m
	pod := func(ns string, ls map[string]string, rv, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: ls, ResourceVersion: rv},
			Status: corev1.PodStatus{PodIP: ip}}
	}
	checked, nonEmpty := 0, 0
	for i := range 400 {
		ns := []string{"n1", "n2"}[i%2]
		old := pod(ns, randomLabels(rng.IntN(4)-1), "1", "10.0.0.1")
		cur := pod(ns, randomLabels(rng.IntN(4)-1), "2", []string{"10.0.0.1", "10.0.0.2"}[rng.IntN(2)])
		if i%5 == 0 {
			cur.Labels = old.Labels // only the endpoint (or nothing) changed
		}
		cases := [][2]any{{nil, cur}, {old, nil}, {old, cur}, {cache.DeletedFinalStateUnknown{Key: ns + "/p", Obj: old}, nil}}
		for _, c := range cases {
			var want sets.Set[string]
			if key := endpointsliceutil.GetPodUpdateProjectionKey(c[0], c[1]); key != nil {
				if want, err = endpointsliceutil.GetServicesToUpdate(plain, key); err != nil {
					t.Fatal(err)
				}
			}
			m.onPod(c[0], c[1])
			got := rec.take()
			if !got.Equal(sets.New(sets.List(want)...)) {
				t.Fatalf("pod change %v -> %v: Services %v, upstream's %v", labelsOf(c[0]), labelsOf(c[1]), sets.List(got), sets.List(want))
			}
			checked++
			if got.Len() > 0 {
				nonEmpty++
			}
		}
	}
	if nonEmpty < checked/4 {
		t.Fatalf("only %d of %d changes matched a Service: the test does not exercise the mapping", nonEmpty, checked)
	}

	// Through the informer: a pod created reaches the mapper, not the replaced handler.
	created := pod("n2", map[string]string{"app": "a"}, "", "") // n2 has empty selectors
	if _, err := cs.CoreV1().Pods("n2").Create(ctx, created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := endpointsliceutil.GetPodUpdateProjectionKey(nil, created)
	want, _ := endpointsliceutil.GetServicesToUpdate(plain, key)
	deadline := time.Now().Add(10 * time.Second)
	got := sets.New[string]()
	for !got.IsSuperset(want) && time.Now().Before(deadline) {
		got = got.Union(rec.take())
		time.Sleep(10 * time.Millisecond)
	}
	if !got.Equal(want) || want.Len() == 0 {
		t.Errorf("a created pod queued %v, want %v (non-empty)", sets.List(got), sets.List(want))
	}
	if upstreamPodHandlerCalled {
		t.Error("the controller's own pod handler ran")
	}

	// A Service whose selector changes is found under its new selector only.
	svc, err := cs.CoreV1().Services("n1").Get(ctx, "s-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"moved": "here", "app": "z"}
	if _, err := cs.CoreV1().Services("n1").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s, err := plain.Services("n1").Get("s-2"); err == nil && s.Spec.Selector["moved"] == "here" {
			break
		}
	}
	rec.take()
	m.onPod(nil, pod("n1", map[string]string{"moved": "here", "app": "z"}, "1", ""))
	if got := rec.take(); !got.Has("n1/s-2") {
		t.Errorf("a pod with the new selector's labels queued %v, want n1/s-2 among them", sets.List(got))
	}
	m.onPod(nil, pod("n1", map[string]string{"app": "z"}, "1", ""))
	if got := rec.take(); got.Has("n1/s-2") {
		t.Errorf("a pod with only part of the new selector queued n1/s-2")
	}
}

func labelsOf(o any) map[string]string {
	switch p := o.(type) {
	case *corev1.Pod:
		return p.Labels
	case cache.DeletedFinalStateUnknown:
		return p.Obj.(*corev1.Pod).Labels
	}
	return nil
}

// TestSelectorMappedPodsWithBatchPeriod: with a batch period the informers are upstream's.
func TestSelectorMappedPodsWithBatchPeriod(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	pods, services, err := SelectorMappedPods(f.Core().V1().Pods(), f.Core().V1().Services(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pods.(mappedPods); ok {
		t.Error("pods wrapped despite the batch period")
	}
	if _, ok := services.(capturedServices); ok {
		t.Error("services wrapped despite the batch period")
	}
}
