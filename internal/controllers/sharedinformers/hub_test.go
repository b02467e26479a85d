package sharedinformers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
	"kubeos.dev/kube/internal/server/servertest"
)

// countingTransport counts the pod lists and watches the hub's client sends (client-go's
// informers list through a watch, sendInitialEvents, where the server allows it).
type countingTransport struct {
	next http.RoundTripper
	gets atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/api/v1/pods") {
		c.gets.Add(1)
	}
	return c.next.RoundTrip(r)
}

// names collects the pod names a handler saw added.
type names struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (n *names) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			n.mu.Lock()
			n.seen[p.Name] = true
			n.mu.Unlock()
		}
	}}
}

func (n *names) has(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[name]
}

func TestHubSharesInformersPerTerm(t *testing.T) {
	ts, err := servertest.Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Stop() })
	cfg, err := ts.Config()
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingTransport{}
	hubCfg := *cfg
	hubCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	hubClient, err := kubernetes.NewForConfig(&hubCfg)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "hub"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod := func(name string) {
		t.Helper()
		_, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	createPod("before")

	hub := sharedinformers.NewHub(hubClient)
	hctx := sharedinformers.NewContext(ctx, hub)
	// Two controllers' terms: each asks for the pod informer, adds a handler and an
	// indexer of the same name, and starts its factory.
	a, b := sharedinformers.For(hctx, nil), sharedinformers.For(hctx, nil)
	seenA, seenB := &names{seen: map[string]bool{}}, &names{seen: map[string]bool{}}
	byNode := cache.Indexers{"node": func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Spec.NodeName}, nil }}
	podsA, podsB := a.Core().V1().Pods().Informer(), b.Core().V1().Pods().Informer()
	if _, err := podsA.AddEventHandler(seenA.handler()); err != nil {
		t.Fatal(err)
	}
	if err := podsA.AddIndexers(byNode); err != nil {
		t.Fatal(err)
	}
	a.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podsA.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	// The second term comes after the informer started, as a controller whose Lease
	// came later: its handler gets the cache's pods, its indexer of the same name is kept.
	if _, err := podsB.AddEventHandler(seenB.handler()); err != nil {
		t.Fatal(err)
	}
	if err := podsB.AddIndexers(byNode); err != nil {
		t.Fatalf("the same indexer added in a second term: %v", err)
	}
	b.Start(ctx.Done())
	if podsA.GetIndexer() != podsB.GetIndexer() {
		t.Fatal("the two terms got different pod caches")
	}
	createPod("both")
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		for who, n := range map[string]*names{"a": seenA, "b": seenB} {
			for _, p := range []string{"before", "both"} {
				if !n.has(p) {
					return fmt.Errorf("handler %s has not seen pod %s", who, p)
				}
			}
		}
		return nil
	})
	if n := counter.gets.Load(); n != 1 {
		t.Errorf("two terms sent %d pod lists or watches, want 1", n)
	}

	// A term that begins while the informer runs (a controller whose Lease came later)
	// gets its handler called only after its Start: upstream constructors add handlers
	// before they have finished building their controller.
	late := sharedinformers.For(hctx, nil)
	var constructed atomic.Bool
	var early atomic.Int32
	seenLate := &names{seen: map[string]bool{}}
	reg, err := late.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if !constructed.Load() {
			early.Add(1)
		}
		seenLate.handler().OnAdd(obj, false)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if reg.HasSynced() {
		t.Error("a handler registration reports synced before its view started")
	}
	constructed.Store(true)
	late.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the late handler did not sync")
	}
	if !seenLate.has("before") || !seenLate.has("both") {
		t.Error("the late handler did not get the cached pods")
	}
	if n := early.Load(); n > 0 {
		t.Errorf("the late handler was called %d times before its view started", n)
	}
	late.Shutdown()

	// The first term ends: its handler is gone, the second's still runs on the same cache.
	a.Shutdown()
	createPod("after-a")
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if !seenB.has("after-a") {
			return fmt.Errorf("handler b has not seen pod after-a")
		}
		return nil
	})
	if seenA.has("after-a") {
		t.Error("the ended term's handler still receives events")
	}

	// The last term ends: the informers stop; a new term lists afresh.
	b.Shutdown()
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if !podsB.IsStopped() {
			return fmt.Errorf("the pod informer still runs after the last term ended")
		}
		return nil
	})
	c := sharedinformers.For(hctx, nil)
	defer c.Shutdown()
	podsC := c.Core().V1().Pods().Informer()
	c.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podsC.HasSynced) {
		t.Fatal("the new term's pod informer did not sync")
	}
	if podsC.GetIndexer() == podsB.GetIndexer() {
		t.Error("a new term reuses the stopped cache")
	}
	if n := len(podsC.GetIndexer().List()); n != 3 {
		t.Errorf("the new term's cache holds %d pods, want 3", n)
	}
	if n := counter.gets.Load(); n != 2 {
		t.Errorf("%d pod lists or watches after a new term, want 2", n)
	}
}

// For without a hub gives the controller a factory of its own (controllers run alone).
func TestForWithoutHub(t *testing.T) {
	f := sharedinformers.For(context.Background(), nil)
	if f == nil {
		t.Fatal("no factory")
	}
	f.Shutdown()
}
