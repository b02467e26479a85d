package watchcache

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

func TestSetIsLazy(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	s := NewSet(ctx, Options{Store: testStore})
	if len(s.Prefixes()) != 0 {
		t.Fatal("caches before first use")
	}
	res, prefix := testResource(t)
	create(t, key(res, "", "x"), newObj("", "x", nil))
	c := s.Get(prefix, nil)
	if s.Get(prefix, nil) != c || len(s.Prefixes()) != 1 {
		t.Fatal("second Get made another cache")
	}
	got, err := c.List(ctx, prefix, ListOptions{})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("list: %v %v", got, err)
	}
	w, err := c.Watch(ctx, prefix, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop(prefix)
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("watcher not closed by Stop")
	}
	if _, err := c.List(ctx, prefix, ListOptions{Revision: c.Revision() + 100}); !errors.Is(err, ErrStopped) {
		t.Fatalf("list on a stopped cache: %v", err)
	}
	if len(s.Prefixes()) != 0 || s.Get(prefix, nil) == c {
		t.Fatal("Stop did not forget the cache")
	}
}

// A cache started on first use serves a watch from a revision written before it started:
// the client that creates and deletes, then watches from the create's resourceVersion, gets
// the DELETED (the CRD conformance fixture does exactly this).
func TestSetCacheStartedLateReplaysHistory(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	s := NewSet(ctx, Options{Store: testStore})
	res, prefix := testResource(t)
	created := create(t, key(res, "", "x"), newObj("", "x", nil))
	del(t, key(res, "", "x"))
	c := s.Get(prefix, nil)
	w, err := c.Watch(ctx, prefix, WatchOptions{Revision: created})
	if err != nil {
		t.Fatalf("watch from the create's revision: %v", err)
	}
	defer w.Stop()
	if ev := nextNonBookmark(t, w); ev.Type != storage.Deleted || ev.Object.GetName() != "x" {
		t.Fatalf("first event %v %v, want DELETED x", ev.Type, ev.Object)
	}
	// The replay caught up before reads are served: the list is the latest state.
	got, err := c.List(ctx, prefix, ListOptions{})
	if err != nil || len(got.Items) != 0 {
		t.Fatalf("list after replay: %v %v", got, err)
	}
	// Before the set's start history is not promised: that is too old, as before.
	if _, err := c.Watch(ctx, prefix, WatchOptions{Revision: s.defaults.StartRevision - 1}); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from before the set: %v", err)
	}
}

// When etcd compacted past the set's start, a late cache starts at the compaction and still
// serves every revision etcd has.
func TestSetCacheStartedLateAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	s := NewSet(ctx, Options{Store: testStore})
	res, prefix := testResource(t)
	create(t, key(res, "", "old"), newObj("", "old", nil))
	compactAt := create(t, key(res, "", "y"), newObj("", "y", nil))
	if err := testStore.Compact(ctx, compactAt); err != nil {
		t.Fatal(err)
	}
	update(t, key(res, "", "y"), func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"v": "2"}) })
	c := s.Get(prefix, nil)
	w, err := c.Watch(ctx, prefix, WatchOptions{Revision: compactAt})
	if err != nil {
		t.Fatalf("watch from the compaction revision: %v", err)
	}
	defer w.Stop()
	if ev := nextNonBookmark(t, w); ev.Type != storage.Modified || ev.Object.GetLabels()["v"] != "2" {
		t.Fatalf("first event %v %v, want MODIFIED y", ev.Type, ev.Object)
	}
	if _, err := c.Watch(ctx, prefix, WatchOptions{Revision: compactAt - 1}); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from before the compaction: %v", err)
	}
}
