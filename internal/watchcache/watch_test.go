package watchcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

func TestWatchResumeAndTooOld(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix, EventBufferSize: 10})
	r1 := create(t, key(res, "a", "x"), newObj("a", "x", nil))
	r2 := update(t, key(res, "a", "x"), func(o *unstructured.Unstructured) { o.Object["data"] = map[string]any{"n": int64(1)} })
	r3 := del(t, key(res, "a", "x"))
	waitRev(t, c, r3)

	w, err := c.Watch(ctx, prefix, WatchOptions{Revision: r1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != storage.Modified || ev.Revision != r2 {
		t.Fatalf("first event %s@%d, want MODIFIED@%d", ev.Type, ev.Revision, r2)
	}
	ev := next(t, w)
	if ev.Type != storage.Deleted || ev.Object.GetResourceVersion() != fmt.Sprint(r3) {
		t.Fatalf("second event %s rv %s, want DELETED rv %d", ev.Type, ev.Object.GetResourceVersion(), r3)
	}
	r4 := create(t, key(res, "a", "y"), newObj("a", "y", nil))
	if ev := next(t, w); ev.Type != storage.Added || ev.Revision != r4 {
		t.Fatalf("live event %s@%d", ev.Type, ev.Revision)
	}

	// Push r1 out of the ring.
	var last int64
	for i := range 12 {
		last = create(t, key(res, "b", fmt.Sprint(i)), newObj("b", fmt.Sprint(i), nil))
	}
	waitRev(t, c, last)
	_, err = c.Watch(ctx, prefix, WatchOptions{Revision: r1})
	if !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("too old: %v", err)
	}
	t.Logf("too old: %v", err)
}

func TestWatchNamespaceAndSelector(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix})
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	ws, err := c.Watch(ctx, prefix, WatchOptions{Predicate: storage.Predicate{Label: sel}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	wn, err := c.Watch(ctx, storage.NamespacePrefix("test.kube.dev", res, "ns1"), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wn.Stop()

	k := key(res, "ns1", "x")
	rAdd := create(t, k, newObj("ns1", "x", map[string]string{"app": "a"}))
	create(t, key(res, "ns2", "other"), newObj("ns2", "other", map[string]string{"app": "b"}))
	rOut := update(t, k, func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"app": "b"}) })
	update(t, k, func(o *unstructured.Unstructured) { o.Object["data"] = map[string]any{"n": int64(7)} })
	rIn := update(t, k, func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"app": "a"}) })
	rDel := del(t, k)
	waitRev(t, c, rDel)

	want := []struct {
		typ   storage.EventType
		rev   int64
		label string
	}{
		{storage.Added, rAdd, "a"},
		{storage.Deleted, rOut, "a"}, // left the selector: DELETED with the previous state
		{storage.Added, rIn, "a"},
		{storage.Deleted, rDel, "a"},
	}
	for i, wnt := range want {
		ev := next(t, ws)
		if ev.Type != wnt.typ || ev.Revision != wnt.rev || ev.Object.GetLabels()["app"] != wnt.label ||
			ev.Object.GetResourceVersion() != fmt.Sprint(wnt.rev) {
			t.Fatalf("selector event %d: %s@%d rv=%s labels=%v, want %s@%d", i, ev.Type, ev.Revision,
				ev.Object.GetResourceVersion(), ev.Object.GetLabels(), wnt.typ, wnt.rev)
		}
	}
	expectNothing(t, ws)

	// The namespace watcher sees its namespace's five changes and nothing of ns2.
	for i := range 5 {
		if ev := next(t, wn); ev.Object.GetNamespace() != "ns1" {
			t.Fatalf("namespace event %d from %s", i, ev.Object.GetNamespace())
		}
	}
	expectNothing(t, wn)
}

// TestWatchInitialEvents checks the streaming-list contract under concurrent writes: every
// object once as ADDED, one InitialEventsEnd bookmark at the snapshot revision, then every
// later change exactly once, in order.
func TestWatchInitialEvents(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	const n = 60
	for i := range n {
		create(t, key(res, "ns", fmt.Sprintf("o%02d", i)), newObj("ns", fmt.Sprintf("o%02d", i), nil))
	}
	c := startCache(t, Options{Prefix: prefix, WatcherBufferSize: 1000})

	// Writers bump data.n of random objects while the watch starts.
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := g; wctx.Err() == nil; i += 2 {
				k := key(res, "ns", fmt.Sprintf("o%02d", i%n))
				_, err := testStore.GuaranteedUpdate(wctx, k, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
					v, _, _ := unstructured.NestedInt64(cur.Object, "data", "n")
					cur.Object["data"] = map[string]any{"n": v + 1}
					return cur, nil
				})
				if err != nil && wctx.Err() == nil {
					t.Errorf("update: %v", err)
					return
				}
			}
		})
	}
	// Let some writes happen first.
	waitRev(t, c, c.Revision()+20)

	w, err := c.Watch(ctx, prefix, WatchOptions{SendInitialEvents: true, Consistent: true, Bookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	state := map[string]int64{} // key → data.n
	var snapRev int64
	for snapRev == 0 {
		ev := next(t, w)
		switch {
		case ev.Type == storage.Added:
			if _, dup := state[ev.Key]; dup {
				t.Fatalf("duplicate initial ADDED %s", ev.Key)
			}
			state[ev.Key], _, _ = unstructured.NestedInt64(ev.Object.Object, "data", "n")
		case ev.Type == storage.Bookmark && ev.InitialEventsEnd:
			snapRev = ev.Revision
		default:
			t.Fatalf("unexpected %s before the initial-events-end bookmark", ev.Type)
		}
	}
	if len(state) != n {
		t.Fatalf("%d initial objects, want %d", len(state), n)
	}
	time.Sleep(0) // the writers keep going a little while we consume
	waitRev(t, c, snapRev+30)
	stopWriters()
	wg.Wait()
	final, err := testStore.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastRev := snapRev
	for lastRev < final.Revision {
		ev := next(t, w)
		if ev.Type == storage.Bookmark {
			if ev.InitialEventsEnd {
				t.Fatal("second initial-events-end bookmark")
			}
			continue
		}
		if ev.Type != storage.Modified {
			t.Fatalf("unexpected %s", ev.Type)
		}
		if ev.Revision <= lastRev {
			t.Fatalf("event at %d after %d", ev.Revision, lastRev)
		}
		lastRev = ev.Revision
		v, _, _ := unstructured.NestedInt64(ev.Object.Object, "data", "n")
		if v != state[ev.Key]+1 {
			t.Fatalf("%s: n=%d after %d: gap or duplicate", ev.Key, v, state[ev.Key])
		}
		state[ev.Key] = v
	}
	for _, o := range final.Items {
		k := key(res, "ns", o.GetName())
		v, _, _ := unstructured.NestedInt64(o.Object, "data", "n")
		if state[k] != v {
			t.Fatalf("%s: watcher has n=%d, storage %d", k, state[k], v)
		}
	}
}

func TestWatchInitialEventsNotOlderThan(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix})
	rev := create(t, key(res, "", "x"), newObj("", "x", nil))
	w, err := c.Watch(ctx, prefix, WatchOptions{SendInitialEvents: true, Revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != storage.Added || ev.Key != key(res, "", "x") {
		t.Fatalf("got %s %s", ev.Type, ev.Key)
	}
	if ev := next(t, w); !ev.InitialEventsEnd || ev.Revision < rev {
		t.Fatalf("got %s@%d end=%v", ev.Type, ev.Revision, ev.InitialEventsEnd)
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix, WatcherBufferSize: 5, UnindexedWatcherBufferSize: 5})
	// A new etcd watch catches up in etcd's next sync pass (up to 100 ms), which delivers
	// what it missed in one burst; wait until the cache's watch has delivered something, so
	// that the changes below reach it one by one.
	waitRev(t, c, create(t, key(res, "", "warm-up"), newObj("", "warm-up", nil)))
	slow, err := c.Watch(ctx, prefix, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast, err := c.Watch(ctx, prefix, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	const n = 20
	got := make(chan int)
	go func() {
		i := 0
		for ev := range fast.ResultChan() {
			if ev.Type == storage.Added {
				i++
			}
			if i == n {
				break
			}
		}
		got <- i
	}()
	for i := range n {
		create(t, key(res, "", fmt.Sprint(i)), newObj("", fmt.Sprint(i), nil))
	}
	select {
	case i := <-got:
		if i != n {
			t.Fatalf("fast watcher got %d events", i)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fast watcher starved")
	}
	var evs []*Event
	for ev := range slow.ResultChan() {
		evs = append(evs, ev)
	}
	last := evs[len(evs)-1]
	if last.Type != storage.ErrorEvent || !errors.Is(last.Err, ErrTooSlow) || len(evs) != 6 {
		t.Fatalf("slow watcher: %d events, last %s %v", len(evs), last.Type, last.Err)
	}
	if c.watcherCount() != 1 {
		t.Fatalf("%d watchers registered, want 1", c.watcherCount())
	}
}

func TestBookmarks(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix, BookmarkInterval: 50 * time.Millisecond})
	wb, err := c.Watch(ctx, prefix, WatchOptions{Bookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()
	wn, err := c.Watch(ctx, prefix, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wn.Stop()
	rev := create(t, key(res, "", "x"), newObj("", "x", nil))
	if ev := next(t, wn); ev.Type != storage.Added {
		t.Fatalf("got %s", ev.Type)
	}
	// A bookmark may come before the create (the timer runs from the watch's start): skip
	// those, but nothing else may come first.
	for {
		ev := next(t, wb)
		if ev.Type == storage.Added {
			break
		}
		if ev.Type != storage.Bookmark || ev.Revision >= rev {
			t.Fatalf("got %s@%d before the create at %d", ev.Type, ev.Revision, rev)
		}
	}
	for range 2 {
		ev := next(t, wb)
		if ev.Type != storage.Bookmark || ev.Revision < rev || ev.InitialEventsEnd {
			t.Fatalf("got %s@%d, want a bookmark >= %d", ev.Type, ev.Revision, rev)
		}
	}
	expectNothing(t, wn)
}

// TestRelistAfterCompaction makes etcd compact past the revision the cache's own watch
// starts from: the cache must re-list, end the watchers that missed a change with
// ErrCompacted, keep the others, and refuse resumes from before the re-list.
func TestRelistAfterCompaction(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	create(t, key(res, "ns1", "a"), newObj("ns1", "a", nil))
	create(t, key(res, "ns2", "b"), newObj("ns2", "b", nil))
	gate := &gatedStore{Store: testStore, release: make(chan struct{}), opened: make(chan struct{}, 10)}
	c := startCache(t, Options{Prefix: prefix, Store: gate})
	r0 := c.Revision()

	// The cache's first watch is held back; register watchers meanwhile.
	w1, err := c.Watch(ctx, storage.NamespacePrefix("test.kube.dev", res, "ns1"), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Stop()
	w2, err := c.Watch(ctx, storage.NamespacePrefix("test.kube.dev", res, "ns2"), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	update(t, key(res, "ns1", "a"), func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"x": "y"}) })
	other, _ := testResource(t)
	cur := create(t, key(other, "", "o"), newObj("", "o", nil)) // so that the compaction removes the update
	if err := testStore.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	close(gate.release)

	// w1 missed the update: it ends with ErrCompacted.
	ev := next(t, w1)
	if ev.Type != storage.ErrorEvent || !errors.Is(ev.Err, storage.ErrCompacted) {
		t.Fatalf("w1 got %s %v", ev.Type, ev.Err)
	}
	if _, ok := <-w1.ResultChan(); ok {
		t.Fatal("w1 not closed after its error")
	}
	// w2 missed nothing and keeps going.
	rb := update(t, key(res, "ns2", "b"), func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"x": "y"}) })
	if ev := next(t, w2); ev.Type != storage.Modified || ev.Revision != rb {
		t.Fatalf("w2 got %s@%d", ev.Type, ev.Revision)
	}
	// The cache holds the update it learnt from the re-list.
	obj, err := c.Get(ctx, key(res, "ns1", "a"), 0)
	if err != nil || obj.GetLabels()["x"] != "y" {
		t.Fatalf("after re-list: %v %v", obj, err)
	}
	if _, err := c.Watch(ctx, prefix, WatchOptions{Revision: r0}); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("resume from before the re-list: %v", err)
	}
}

// gatedStore holds the first Watch until release is closed. It is the real store otherwise.
type gatedStore struct {
	*storage.Store
	release chan struct{}
	opened  chan struct{}
	once    sync.Once
}

func (g *gatedStore) Watch(ctx context.Context, prefix string, o storage.WatchOptions) (storage.Watcher, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Watch(ctx, prefix, o)
}
