package api

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// recorder keeps the events an informer delivered, in order.
type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.evs = append(r.evs, s)
	r.mu.Unlock()
}

func (r *recorder) has(want string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e == want {
			return true
		}
	}
	return false
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.evs...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// Two minutes: after the server's restart the reflectors come back on client-go's
	// back-off (0.8 s doubling, jittered up to 2×), which a loaded machine stretches past
	// 30 s (a full local run timed out at 30 s).
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInformers runs a SharedInformerFactory with client-go's defaults (the kubeconfig as
// kubectl uses it, default QPS, WatchListClient on): it syncs, sees creates, updates and
// deletes in order, and carries on after the server restarts.
func TestInformers(t *testing.T) {
	clientsSuite.Need(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", clientsSrv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "informers"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactory(cs, 0)
	cms := factory.Core().V1().ConfigMaps().Informer()
	nss := factory.Core().V1().Namespaces().Informer()
	rec := &recorder{}
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			cm := obj.(*corev1.ConfigMap)
			// kube-root-ca.crt is published in every namespace, as upstream does.
			if cm.Namespace == ns && cm.Name != "kube-root-ca.crt" {
				rec.add("add " + cm.Name)
			}
		},
		UpdateFunc: func(old, obj any) {
			cm := obj.(*corev1.ConfigMap)
			if cm.Namespace == ns && cm.Name != "kube-root-ca.crt" && old.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
				rec.add(fmt.Sprintf("update %s %s", cm.Name, cm.Data["v"]))
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			cm := obj.(*corev1.ConfigMap)
			if cm.Namespace == ns {
				rec.add("delete " + cm.Name)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), cms.HasSynced, nss.HasSynced) {
		t.Fatal("informers did not sync within 30 s")
	}
	if _, ok, _ := nss.GetStore().GetByKey(ns); !ok {
		t.Fatalf("namespace informer does not hold %q after sync", ns)
	}
	if !rec.has("add before") {
		t.Fatalf("the initial list did not deliver the existing configmap: %v", rec.snapshot())
	}

	cmClient := cs.CoreV1().ConfigMaps(ns)
	cm, err := cmClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		cm.Data["v"] = fmt.Sprint(i)
		if cm, err = cmClient.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmClient.Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add before", "add x", "update x 2", "update x 3", "delete x"}
	waitFor(t, "create, update, update, delete", func() bool { return len(rec.snapshot()) >= len(want) })
	if got := rec.snapshot(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}

	// The server restarts (same data, same port): the informers re-establish their watches.
	if err := clientsSrv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := cmClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the informer to see a configmap created after the restart", func() bool { return rec.has("add after-restart") })
	if _, ok, _ := cms.GetStore().GetByKey(ns + "/before"); !ok {
		t.Fatal("after the restart the informer lost an object that still exists")
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "informers-gone", metav1.DeleteOptions{}); err == nil {
		t.Fatal("deleting a namespace that never existed succeeded")
	}
}
