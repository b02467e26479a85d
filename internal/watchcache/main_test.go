package watchcache

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// One etcd member serves every test and benchmark of the package; each test uses its own
// resource prefix.
var (
	testClient *clientv3.Client
	testStore  *storage.Store
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "watchcache-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: dir, ProgressNotifyInterval: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer member.Close()
	testClient, err = etcd.NewClient(etcd.ClientOptions{Endpoints: member.ClientURLs()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testClient.Close()
	testStore = storage.New(testClient)
	return m.Run()
}

var prefixSeq atomic.Int64

// testResource returns a fresh resource name and its prefix.
func testResource(t testing.TB) (resource, prefix string) {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	resource = fmt.Sprintf("%s-%d", name, prefixSeq.Add(1))
	return resource, storage.ResourcePrefix("test.kube.dev", resource)
}

func key(resource, ns, name string) string {
	return storage.Key("test.kube.dev", resource, ns, name)
}

func newObj(ns, name string, labels map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.kube.dev/v1",
		"kind":       "Thing",
		"metadata":   map[string]any{"name": name},
		"data":       map[string]any{"n": int64(0)},
	}}
	if ns != "" {
		obj.SetNamespace(ns)
	}
	if labels != nil {
		obj.SetLabels(labels)
	}
	return obj
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startCache starts a cache over s and waits until it is ready; it stops at the end of the test.
func startCache(t testing.TB, o Options) *Cache {
	t.Helper()
	if o.Store == nil {
		o.Store = testStore
	}
	if strings.HasPrefix(t.Name(), "TestPacked/") {
		o.Pack = true
	}
	c := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return c
}

func create(t testing.TB, k string, obj *unstructured.Unstructured) int64 {
	t.Helper()
	out, err := testStore.Create(testCtx(t), k, obj)
	if err != nil {
		t.Fatalf("create %s: %v", k, err)
	}
	rev, _ := storage.Revision(out)
	return rev
}

func update(t testing.TB, k string, fn func(obj *unstructured.Unstructured)) int64 {
	t.Helper()
	out, err := testStore.GuaranteedUpdate(testCtx(t), k, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		fn(cur)
		return cur, nil
	})
	if err != nil {
		t.Fatalf("update %s: %v", k, err)
	}
	rev, _ := storage.Revision(out)
	return rev
}

func del(t testing.TB, k string) int64 {
	t.Helper()
	if _, err := testStore.Delete(testCtx(t), k, storage.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", k, err)
	}
	rev, err := testStore.CurrentRevision(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// next returns the next event of w, failing the test after a deadline.
func next(t testing.TB, w *Watcher) *Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no event within 10s")
	}
	return nil
}

// nextNonBookmark skips periodic bookmarks.
func nextNonBookmark(t testing.TB, w *Watcher) *Event {
	t.Helper()
	for {
		ev := next(t, w)
		if ev.Type != storage.Bookmark || ev.InitialEventsEnd {
			return ev
		}
	}
}

// waitRev waits until the cache has reached rev.
func waitRev(t testing.TB, c *Cache, rev int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Revision() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("cache at %d, want %d", c.Revision(), rev)
		}
		time.Sleep(time.Millisecond)
	}
}

// expectNothing checks that w has no event pending after the cache reached rev: every event
// up to rev would have been delivered already, synchronously, by the dispatcher.
func expectNothing(t testing.TB, w *Watcher) {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("unexpected event %s %s", ev.Type, ev.Key)
	default:
	}
}
