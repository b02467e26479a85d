package storagetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

// want is an expected watch event; rev 0 accepts any revision.
type want struct {
	typ storage.EventType
	key string
	rev string
}

func watch(t *testing.T, s Store, prefix string, o storage.WatchOptions) storage.Watcher {
	t.Helper()
	w, err := s.Watch(t.Context(), prefix, o)
	if err != nil {
		t.Fatalf("watch %s: %v", prefix, err)
	}
	t.Cleanup(w.Stop)
	return w
}

func nextEvent(t *testing.T, w storage.Watcher) storage.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended")
		}
		return ev
	case <-time.After(wait):
		t.Fatalf("no event within %v", wait)
	}
	return storage.Event{}
}

// expectEvents reads exactly the wanted events, in order. Writing a last, known event and
// expecting it proves nothing else came before it.
func expectEvents(t *testing.T, w storage.Watcher, wants ...want) []storage.Event {
	t.Helper()
	var got []storage.Event
	for i, wt := range wants {
		ev := nextEvent(t, w)
		got = append(got, ev)
		if ev.Type == storage.ErrorEvent {
			t.Fatalf("event %d: error %v", i, ev.Err)
		}
		if ev.Type != wt.typ || ev.Key != wt.key || (wt.rev != "" && fmt.Sprint(ev.Revision) != wt.rev) {
			t.Fatalf("event %d: %s %s@%d, want %s %s@%s", i, ev.Type, ev.Key, ev.Revision, wt.typ, wt.key, wt.rev)
		}
		if ev.Object == nil || ev.Object.GetResourceVersion() != fmt.Sprint(ev.Revision) {
			t.Fatalf("event %d: object %v does not carry the event's revision %d", i, ev.Object, ev.Revision)
		}
	}
	return got
}

func testWatch(t *testing.T, s Store) {
	t.Run("order", func(t *testing.T) { testWatchOrder(t, s) })
	t.Run("resume", func(t *testing.T) { testWatchResume(t, s) })
	t.Run("compacted", func(t *testing.T) { testWatchCompacted(t, s) })
	t.Run("predicate", func(t *testing.T) { testWatchPredicate(t, s) })
	t.Run("progress", func(t *testing.T) { testWatchProgress(t, s) })
	t.Run("lazy-prev", func(t *testing.T) { testWatchLazyPrev(t, s) })
}

// testWatchLazyPrev: a LazyPrev watch leaves a modification's previous state undecoded but
// names its revision, and Prev decodes it; a deletion still carries it (its object is that
// state); with a predicate the option is ignored.
func testWatchLazyPrev(t *testing.T, s Store) {
	p := prefixFor(t)
	w := watch(t, s, p, storage.WatchOptions{Revision: currentRevision(t, s), LazyPrev: true})
	notNone, _ := labels.Parse("app!=none") // matches every object of the test
	wp := watch(t, s, p, storage.WatchOptions{Revision: currentRevision(t, s), LazyPrev: true, Predicate: storage.Predicate{Label: notNone}})
	a1 := mustCreate(t, s, p+"a", newObj("a", nil))
	a2 := mustUpdate(t, s, p+"a", setData("2"))
	del := mustDelete(t, s, p+"a")
	evs := expectEvents(t, w,
		want{storage.Added, p + "a", a1.GetResourceVersion()},
		want{storage.Modified, p + "a", a2.GetResourceVersion()},
		want{storage.Deleted, p + "a", del.GetResourceVersion()},
	)
	m := evs[1]
	if m.PrevObject != nil {
		t.Errorf("MODIFIED of a LazyPrev watch has its previous state decoded")
	}
	if fmt.Sprint(m.PrevRevision) != a1.GetResourceVersion() {
		t.Errorf("MODIFIED PrevRevision %d, want %s", m.PrevRevision, a1.GetResourceVersion())
	}
	prev, err := m.Prev()
	if err != nil || prev == nil || prev.GetResourceVersion() != a1.GetResourceVersion() || prev.GetUID() != "uid-a" {
		t.Fatalf("Prev() = %v, %v; want the state at %s", prev, err, a1.GetResourceVersion())
	}
	if m.Settled().PrevObject != nil {
		t.Errorf("Settled decoded the previous state")
	}
	if s2 := m.Settled(); s2.PrevRevision != m.PrevRevision {
		t.Errorf("Settled dropped PrevRevision")
	}
	if d := evs[2]; d.PrevObject == nil || d.PrevObject.GetResourceVersion() != a2.GetResourceVersion() {
		t.Errorf("DELETED of a LazyPrev watch without its previous state: %v", d.PrevObject)
	}
	pevs := expectEvents(t, wp,
		want{storage.Added, p + "a", a1.GetResourceVersion()},
		want{storage.Modified, p + "a", a2.GetResourceVersion()},
		want{storage.Deleted, p + "a", del.GetResourceVersion()},
	)
	if pevs[1].PrevObject == nil {
		t.Errorf("a predicate watch's MODIFIED lacks its previous state")
	}
}

func testWatchOrder(t *testing.T, s Store) {
	p := prefixFor(t)
	w := watch(t, s, p, storage.WatchOptions{Revision: currentRevision(t, s)})
	other := watch(t, s, p+"ns1", storage.WatchOptions{Revision: currentRevision(t, s)})

	a1 := mustCreate(t, s, p+"a", newObj("a", nil))
	a2 := mustUpdate(t, s, p+"a", setData("2"))
	mustCreate(t, s, p+"ns10/x", newObj("x", nil))
	b := mustCreate(t, s, p+"ns1/b", newObj("b", nil))
	del := mustDelete(t, s, p+"a")

	evs := expectEvents(t, w,
		want{storage.Added, p + "a", a1.GetResourceVersion()},
		want{storage.Modified, p + "a", a2.GetResourceVersion()},
		want{storage.Added, p + "ns10/x", ""},
		want{storage.Added, p + "ns1/b", b.GetResourceVersion()},
		want{storage.Deleted, p + "a", del.GetResourceVersion()},
	)
	if evs[0].PrevObject != nil {
		t.Errorf("ADDED has a previous state")
	}
	if evs[1].PrevObject.GetResourceVersion() != a1.GetResourceVersion() {
		t.Errorf("MODIFIED previous state at %s, want %s", evs[1].PrevObject.GetResourceVersion(), a1.GetResourceVersion())
	}
	d := evs[4]
	if v, _, _ := unstructured.NestedString(d.Object.Object, "data", "k"); v != "2" || d.Object.GetUID() != "uid-a" {
		t.Errorf("DELETED does not carry the last state: %v", d.Object.Object)
	}
	if d.PrevObject.GetResourceVersion() != a2.GetResourceVersion() {
		t.Errorf("DELETED previous state at %s, want %s", d.PrevObject.GetResourceVersion(), a2.GetResourceVersion())
	}
	// A watch of the namespace ns1 does not see ns10.
	expectEvents(t, other, want{storage.Added, p + "ns1/b", b.GetResourceVersion()})
	fence := mustCreate(t, s, p+"ns1/fence", newObj("fence", nil))
	expectEvents(t, other, want{storage.Added, p + "ns1/fence", fence.GetResourceVersion()})
}

func testWatchResume(t *testing.T, s Store) {
	p := prefixFor(t)
	start := currentRevision(t, s)
	var all []want
	add := func(typ storage.EventType, key string, obj *unstructured.Unstructured) {
		all = append(all, want{typ, key, obj.GetResourceVersion()})
	}
	add(storage.Added, p+"a", mustCreate(t, s, p+"a", newObj("a", nil)))
	add(storage.Added, p+"b", mustCreate(t, s, p+"b", newObj("b", nil)))
	add(storage.Modified, p+"a", mustUpdate(t, s, p+"a", setData("2")))
	add(storage.Deleted, p+"b", mustDelete(t, s, p+"b"))
	add(storage.Added, p+"b", mustCreate(t, s, p+"b", newObj("b", nil)))
	add(storage.Modified, p+"b", mustUpdate(t, s, p+"b", setData("3")))

	type resumed struct {
		w    storage.Watcher
		want []want
	}
	var ws []resumed
	for i := -1; i < len(all); i++ {
		from := start
		if i >= 0 {
			from, _ = storage.ParseRevision(all[i].rev)
		}
		ws = append(ws, resumed{watch(t, s, p, storage.WatchOptions{Revision: from}), all[i+1:]})
	}
	fence := mustCreate(t, s, p+"fence", newObj("fence", nil))
	for _, r := range ws {
		expectEvents(t, r.w, append(r.want, want{storage.Added, p + "fence", fence.GetResourceVersion()})...)
	}
}

func testWatchCompacted(t *testing.T, s Store) {
	p := prefixFor(t)
	first := rvOf(t, mustCreate(t, s, p+"a", newObj("a", nil)))
	for i := range 3 {
		mustUpdate(t, s, p+"a", setData(fmt.Sprint(i)))
	}
	c := currentRevision(t, s)
	if err := s.Compact(t.Context(), c); err != nil {
		t.Fatalf("compact: %v", err)
	}
	for _, from := range []int64{first, c - 2} {
		w := watch(t, s, p, storage.WatchOptions{Revision: from})
		ev := nextEvent(t, w)
		if ev.Type != storage.ErrorEvent || !errors.Is(ev.Err, storage.ErrCompacted) {
			t.Fatalf("watch from compacted revision %d: %s %v, want an error wrapping ErrCompacted", from, ev.Type, ev.Err)
		}
		var se *storage.Error
		if errors.As(ev.Err, &se) && se.Current < c {
			t.Errorf("error names compacted revision %d, want at least %d", se.Current, c)
		}
		select {
		case _, ok := <-w.ResultChan():
			if ok {
				t.Error("the watch goes on after its error")
			}
		case <-time.After(wait):
			t.Error("the watch is not closed after its error")
		}
	}
	// Watching from the revision just before the compaction point is allowed: it starts at it.
	w := watch(t, s, p, storage.WatchOptions{Revision: c - 1})
	next := mustUpdate(t, s, p+"a", setData("after"))
	got := nextEvent(t, w)
	if got.Type == storage.ErrorEvent {
		t.Fatalf("watch from %d (compacted at %d): %v", c-1, c, got.Err)
	}
	if got.Revision == c {
		got = nextEvent(t, w) // the last update before compaction, if it was at c
	}
	if got.Type != storage.Modified || fmt.Sprint(got.Revision) != next.GetResourceVersion() {
		t.Errorf("got %s@%d, want MODIFIED@%s", got.Type, got.Revision, next.GetResourceVersion())
	}
}

func testWatchPredicate(t *testing.T, s Store) {
	p := prefixFor(t)
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	w := watch(t, s, p, storage.WatchOptions{Revision: currentRevision(t, s), Predicate: storage.Predicate{Label: sel}})
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}

	x1 := mustCreate(t, s, p+"x", newObj("x", web))
	mustCreate(t, s, p+"y", newObj("y", db))
	x2 := mustUpdate(t, s, p+"x", setLabels(db))  // leaves the selector
	y2 := mustUpdate(t, s, p+"y", setLabels(web)) // enters it
	y3 := mustUpdate(t, s, p+"y", setData("3"))
	mustUpdate(t, s, p+"x", setData("3")) // outside, unseen
	y4 := mustDelete(t, s, p+"y")
	mustDelete(t, s, p+"x") // outside, unseen
	fence := mustCreate(t, s, p+"z", newObj("z", web))

	evs := expectEvents(t, w,
		want{storage.Added, p + "x", x1.GetResourceVersion()},
		want{storage.Deleted, p + "x", x2.GetResourceVersion()},
		want{storage.Added, p + "y", y2.GetResourceVersion()},
		want{storage.Modified, p + "y", y3.GetResourceVersion()},
		want{storage.Deleted, p + "y", y4.GetResourceVersion()},
		want{storage.Added, p + "z", fence.GetResourceVersion()},
	)
	if evs[1].Object.GetLabels()["app"] != "web" {
		t.Errorf("the DELETED of an object leaving the selector carries %v, want the last matching state", evs[1].Object.GetLabels())
	}
}

func testWatchProgress(t *testing.T, s Store) {
	p := prefixFor(t)
	start := currentRevision(t, s)
	w := watch(t, s, p, storage.WatchOptions{Revision: start, ProgressNotify: true})
	plain := watch(t, s, p, storage.WatchOptions{Revision: start})
	a := mustCreate(t, s, p+"a", newObj("a", nil))
	expectEvents(t, w, want{storage.Added, p + "a", a.GetResourceVersion()})
	rev := currentRevision(t, s)

	// The request reaches only watches etcd has registered; ask again until one answers.
	deadline := time.After(wait)
	for got := false; !got; {
		if err := s.RequestProgress(t.Context()); err != nil {
			t.Fatalf("request progress: %v", err)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != storage.Bookmark {
				t.Fatalf("got %s %s, want a bookmark", ev.Type, ev.Key)
			}
			if ev.Revision < rev {
				t.Fatalf("bookmark at %d, before the revision %d read after the last event", ev.Revision, rev)
			}
			got = true
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no bookmark within %v", wait)
		}
	}
	// A watch that did not ask for progress notifications gets no bookmarks.
	fence := mustCreate(t, s, p+"fence", newObj("fence", nil))
	expectEvents(t, plain,
		want{storage.Added, p + "a", a.GetResourceVersion()},
		want{storage.Added, p + "fence", fence.GetResourceVersion()},
	)
}
