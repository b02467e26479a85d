package watchcache

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// TestPacked runs the cache's behavioural tests again on packed caches (startCache packs
// the caches of tests under TestPacked/).
func TestPacked(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ListRevisionZeroConsistentAndNotOlderThan", TestListRevisionZeroConsistentAndNotOlderThan},
		{"ListPaging", TestListPaging},
		{"WatchResumeAndTooOld", TestWatchResumeAndTooOld},
		{"WatchNamespaceAndSelector", TestWatchNamespaceAndSelector},
		{"WatchInitialEvents", TestWatchInitialEvents},
		{"WatchInitialEventsNotOlderThan", TestWatchInitialEventsNotOlderThan},
		{"RelistAfterCompaction", TestRelistAfterCompaction},
		{"IndexedListAndWatch", TestIndexedListAndWatch},
		{"IndexedPagingAndInitialEvents", TestIndexedPagingAndInitialEvents},
		{"IndexAddedToRunningCache", TestIndexAddedToRunningCache},
		{"IndexAfterRelist", TestIndexAfterRelist},
		{"PackedReadsAreCopies", testPackedReadsAreCopies},
	} {
		t.Run(tc.name, tc.run)
	}
}

// testPackedReadsAreCopies: a packed cache answers every read with the stored object (equal
// to what storage returns, integers as int64), as a fresh copy, and its ring replays carry
// the previous state too.
func testPackedReadsAreCopies(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix})
	if !c.o.Pack {
		t.Fatal("the cache is not packed")
	}
	k := key(res, "ns", "a")
	r1 := create(t, k, newObj("ns", "a", map[string]string{"app": "x"}))
	r2 := update(t, k, func(o *unstructured.Unstructured) {
		o.Object["data"] = map[string]any{"n": int64(7), "s": "text", "f": 1.5, "list": []any{"a", int64(2), true, nil}}
	})
	waitRev(t, c, r2)
	want, err := testStore.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Object, want.Object) {
		t.Fatalf("Get = %v, want %v", got.Object, want.Object)
	}
	if _, ok := got.Object["data"].(map[string]any)["n"].(int64); !ok {
		t.Fatalf("data.n decoded as %T, want int64", got.Object["data"].(map[string]any)["n"])
	}
	got.Object["data"] = "changed by a reader"
	again, err := c.Get(ctx, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(again.Object, want.Object) {
		t.Fatal("a reader's change to a Get result reached the cache")
	}
	list, err := c.List(ctx, prefix, ListOptions{})
	if err != nil || len(list.Items) != 1 || !equality.Semantic.DeepEqual(list.Items[0].Object, want.Object) {
		t.Fatalf("List = %v, %v", list, err)
	}

	// Resume from r1: the MODIFIED event carries the new and the previous state; then a
	// deletion replayed carries the last state at the deletion's revision.
	r3 := del(t, k)
	waitRev(t, c, r3)
	w, err := c.Watch(ctx, prefix, WatchOptions{Revision: r1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := nextNonBookmark(t, w)
	if ev.Type != storage.Modified || ev.PrevObject == nil || revOf(ev.PrevObject) != r1 || revOf(ev.Object) != r2 {
		t.Fatalf("first replayed event: %s prev=%v obj rev %d", ev.Type, ev.PrevObject, revOf(ev.Object))
	}
	ev = nextNonBookmark(t, w)
	if ev.Type != storage.Deleted || revOf(ev.Object) != r3 || !strings.Contains(ev.Object.GetName(), "a") {
		t.Fatalf("second replayed event: %s rev %d", ev.Type, revOf(ev.Object))
	}
}

// TestSetPacked: Set.Packed answers from the set's PackPrefix, with or without the
// prefix's trailing slash, and starts no cache.
func TestSetPacked(t *testing.T) {
	crds := "/registry/apiextensions.k8s.io/customresourcedefinitions/"
	packing := NewSet(t.Context(), Options{PackPrefix: func(p string) bool { return p == crds }})
	plain := NewSet(t.Context(), Options{})
	for _, tc := range []struct {
		set    *Set
		prefix string
		want   bool
	}{
		{packing, crds, true},
		{packing, strings.TrimSuffix(crds, "/"), true},
		{packing, "/registry/configmaps/", false},
		{plain, crds, false},
	} {
		if got := tc.set.Packed(tc.prefix); got != tc.want {
			t.Errorf("Packed(%q) = %v, want %v", tc.prefix, got, tc.want)
		}
	}
	if p := packing.Prefixes(); len(p) != 0 {
		t.Errorf("Packed started caches: %v", p)
	}
}
