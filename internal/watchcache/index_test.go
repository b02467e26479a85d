package watchcache

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

const nodeField = "spec.nodeName"

// podAttrs offers spec.nodeName beside the default fields, as the Pod kind does.
func podAttrs(obj *unstructured.Unstructured) (labels.Set, fields.Set) {
	l, f := storage.DefaultAttrs(obj)
	f[nodeField], _, _ = unstructured.NestedString(obj.Object, "spec", "nodeName")
	return l, f
}

func newPod(ns, name, node string) *unstructured.Unstructured {
	obj := newObj(ns, name, nil)
	if node != "" {
		obj.Object["spec"] = map[string]any{"nodeName": node}
	}
	return obj
}

func onNode(node string) storage.Predicate {
	return storage.Predicate{Field: fields.OneTermEqualSelector(nodeField, node), Attrs: podAttrs}
}

func TestExactIndex(t *testing.T) {
	for _, tc := range []struct {
		fields   []string
		selector string
		i        int
		value    string
	}{
		{[]string{nodeField}, "spec.nodeName=a", 0, "a"},
		{[]string{nodeField}, "spec.nodeName==a", 0, "a"},
		{[]string{nodeField}, "spec.nodeName=", 0, ""},
		{[]string{nodeField}, "metadata.name=x,spec.nodeName=a", 0, "a"},
		{[]string{nodeField}, "spec.nodeName!=a", -1, ""},
		{[]string{nodeField}, "metadata.name=x", -1, ""},
		{[]string{nodeField}, "", -1, ""},
		{nil, "spec.nodeName=a", -1, ""},
		{[]string{"status.phase", nodeField}, "spec.nodeName=a,status.phase=Running", 0, "Running"},
		{[]string{"status.phase", nodeField}, "spec.nodeName=a,status.phase!=Running", 1, "a"},
	} {
		sel, err := fields.ParseSelector(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		i, v, ok := exactIndex(tc.fields, storage.Predicate{Field: sel})
		if i != tc.i || v != tc.value || ok != (tc.i >= 0) {
			t.Errorf("%v %q: got %d %q %v, want %d %q", tc.fields, tc.selector, i, v, ok, tc.i, tc.value)
		}
	}
	if _, _, ok := exactIndex([]string{nodeField}, storage.Predicate{}); ok {
		t.Error("empty predicate uses an index")
	}
}

// verifyIndex checks that every index holds exactly the cache's entries, each under the value
// its object has now.
func verifyIndex(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, ix := range c.indexes {
		n := 0
		for v, it := range ix.entries {
			if it.Len() == 0 {
				t.Errorf("index %s: empty tree for %q kept", ix.field, v)
			}
			n += it.Len()
		}
		if n != c.tree.Len() {
			t.Errorf("index %s holds %d entries, the tree %d", ix.field, n, c.tree.Len())
		}
		c.tree.Ascend(func(e *entry) bool {
			obj, err := e.object()
			if err != nil {
				t.Fatal(err)
			}
			_, f := c.o.Attrs(obj)
			if len(e.vals) != len(c.indexes) || e.vals[i] != f[ix.field] {
				t.Errorf("%s: vals %q, %s is %q", e.key, e.vals, ix.field, f[ix.field])
				return true
			}
			if got, ok := ix.entries[e.vals[i]].Get(e); !ok || got != e {
				t.Errorf("%s not in index %s under %q", e.key, ix.field, e.vals[i])
			}
			return true
		})
	}
}

// indexedWatchers is the number of watchers in the lists of field=value.
func indexedWatchers(c *Cache, field, value string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, ix := range c.indexes {
		if ix.field == field && ix.watchers[value] != nil {
			return len(ix.watchers[value].ws)
		}
	}
	return 0
}

func TestIndexedListAndWatch(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	create(t, key(res, "ns1", "p1"), newPod("ns1", "p1", "node-a"))
	create(t, key(res, "ns2", "p2"), newPod("ns2", "p2", "node-a"))
	create(t, key(res, "ns1", "p3"), newPod("ns1", "p3", "node-b"))
	create(t, key(res, "ns1", "p4"), newPod("ns1", "p4", ""))
	c := startCache(t, Options{Prefix: prefix, Attrs: podAttrs, IndexFields: []string{nodeField}})
	verifyIndex(t, c)

	for _, tc := range []struct {
		prefix, node string
		want         []string
	}{
		{prefix, "node-a", []string{"ns1/p1", "ns2/p2"}},
		{prefix, "node-b", []string{"ns1/p3"}},
		{prefix, "", []string{"ns1/p4"}},
		{prefix, "node-z", nil},
		{storage.NamespacePrefix("test.kube.dev", res, "ns2"), "node-a", []string{"ns2/p2"}},
	} {
		got, err := c.List(ctx, tc.prefix, ListOptions{Predicate: onNode(tc.node), Consistent: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(got), tc.want) {
			t.Errorf("list %s on %q: %v, want %v", tc.prefix, tc.node, names(got), tc.want)
		}
	}

	wa, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	wb, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode("node-b")})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()
	all, err := c.Watch(ctx, prefix, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	if indexedWatchers(c, nodeField, "node-a") != 1 || indexedWatchers(c, nodeField, "node-b") != 1 {
		t.Fatal("node watchers are not in the index's watcher lists")
	}

	// p1 moves from node-a to node-b: node-a's watcher sees it go, node-b's see it come.
	r := update(t, key(res, "ns1", "p1"), func(o *unstructured.Unstructured) { o.Object["spec"] = map[string]any{"nodeName": "node-b"} })
	if ev := next(t, wa); ev.Type != storage.Deleted || ev.Object.GetName() != "p1" || ev.Revision != r {
		t.Fatalf("node-a watcher: %s %s@%d", ev.Type, ev.Object.GetName(), ev.Revision)
	}
	if ev := next(t, wb); ev.Type != storage.Added || ev.Object.GetName() != "p1" {
		t.Fatalf("node-b watcher: %s %s", ev.Type, ev.Object.GetName())
	}
	if ev := next(t, all); ev.Type != storage.Modified || ev.Object.GetName() != "p1" {
		t.Fatalf("unfiltered watcher: %s %s", ev.Type, ev.Object.GetName())
	}
	// p3 (node-b) changes and is deleted: node-a's watcher sees nothing.
	update(t, key(res, "ns1", "p3"), func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"x": "y"}) })
	if ev := next(t, wb); ev.Type != storage.Modified || ev.Object.GetName() != "p3" {
		t.Fatalf("node-b watcher: %s %s", ev.Type, ev.Object.GetName())
	}
	r = del(t, key(res, "ns1", "p3"))
	if ev := next(t, wb); ev.Type != storage.Deleted || ev.Object.GetName() != "p3" {
		t.Fatalf("node-b watcher: %s %s", ev.Type, ev.Object.GetName())
	}
	// An unassigned pod is bound to node-a.
	r = update(t, key(res, "ns1", "p4"), func(o *unstructured.Unstructured) { o.Object["spec"] = map[string]any{"nodeName": "node-a"} })
	if ev := next(t, wa); ev.Type != storage.Added || ev.Object.GetName() != "p4" {
		t.Fatalf("node-a watcher: %s %s", ev.Type, ev.Object.GetName())
	}
	waitRev(t, c, r)
	expectNothing(t, wb)
	verifyIndex(t, c)

	got, err := c.List(ctx, prefix, ListOptions{Predicate: onNode("node-b")})
	if err != nil || !slices.Equal(names(got), []string{"ns1/p1"}) {
		t.Fatalf("node-b after the changes: %v %v", names(got), err)
	}
	wa.Stop()
	if indexedWatchers(c, nodeField, "node-a") != 0 {
		t.Fatal("a stopped watcher stays in its index list")
	}
}

// TestIndexTargets: a change is offered to the watchers of its old and new values and to
// those without an indexed selector, not to the watchers of other values.
func TestIndexTargets(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix, Attrs: podAttrs, IndexFields: []string{nodeField}})
	var ws []*Watcher
	for i := range 100 {
		w, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode(fmt.Sprintf("node-%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	for _, o := range []WatchOptions{{}, {Predicate: storage.Predicate{Label: sel, Attrs: podAttrs}}} {
		w, err := c.Watch(ctx, prefix, o)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	defer func() {
		for _, w := range ws {
			w.Stop()
		}
	}()
	if n := c.watcherCount(); n != 102 {
		t.Fatalf("watcherCount %d", n)
	}
	for _, tc := range []struct {
		name      string
		cur, prev []string
		want      int
	}{
		{"added on node-3", []string{"node-3"}, nil, 3},
		{"moved from node-3 to node-7", []string{"node-7"}, []string{"node-3"}, 4},
		{"changed on node-7", []string{"node-7"}, []string{"node-7"}, 3},
		{"deleted on node-7", nil, []string{"node-7"}, 3},
		{"on a node nobody watches", []string{"node-x"}, nil, 2},
	} {
		c.mu.RLock()
		got := c.targetsLocked(key(res, "ns", "p"), tc.cur, tc.prev, nil)
		c.mu.RUnlock()
		if len(got) != tc.want {
			t.Errorf("%s: %d targets, want %d", tc.name, len(got), tc.want)
		}
	}
}

func TestIndexedPagingAndInitialEvents(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	var onA []string
	for i := range 7 {
		node := "node-b"
		if i%2 == 0 {
			node = "node-a"
			onA = append(onA, fmt.Sprintf("ns/p%d", i))
		}
		create(t, key(res, "ns", fmt.Sprintf("p%d", i)), newPod("ns", fmt.Sprintf("p%d", i), node))
	}
	c := startCache(t, Options{Prefix: prefix, Attrs: podAttrs, IndexFields: []string{nodeField}})

	// A paged list of node-a and a paged list of everything, interleaved at one revision:
	// each continues from its own snapshot.
	var gotA, gotAll []string
	pa, err := c.List(ctx, prefix, ListOptions{Limit: 2, Predicate: onNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	pall, err := c.List(ctx, prefix, ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if pa.Revision != pall.Revision {
		t.Fatalf("revisions %d and %d", pa.Revision, pall.Revision)
	}
	gotA, gotAll = append(gotA, names(pa)...), append(gotAll, names(pall)...)
	// A change after the first pages is not in the later ones.
	create(t, key(res, "ns", "p0a"), newPod("ns", "p0a", "node-a"))
	for pa.Continue != "" || pall.Continue != "" {
		if pa.Continue != "" {
			if pa, err = c.List(ctx, prefix, ListOptions{Limit: 2, Continue: pa.Continue, Predicate: onNode("node-a")}); err != nil {
				t.Fatal(err)
			}
			gotA = append(gotA, names(pa)...)
		}
		if pall.Continue != "" {
			if pall, err = c.List(ctx, prefix, ListOptions{Limit: 3, Continue: pall.Continue}); err != nil {
				t.Fatal(err)
			}
			gotAll = append(gotAll, names(pall)...)
		}
	}
	if !slices.Equal(gotA, onA) {
		t.Errorf("paged node-a list %v, want %v", gotA, onA)
	}
	if len(gotAll) != 7 {
		t.Errorf("paged list of all: %v", gotAll)
	}

	// Initial events of a node-a watch: node-a's pods (p0a included now), then the bookmark.
	w, err := c.Watch(ctx, prefix, WatchOptions{SendInitialEvents: true, Consistent: true, Predicate: onNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var initial []string
	for {
		ev := next(t, w)
		if ev.Type == storage.Bookmark && ev.InitialEventsEnd {
			break
		}
		if ev.Type != storage.Added {
			t.Fatalf("initial event %s", ev.Type)
		}
		initial = append(initial, ev.Object.GetNamespace()+"/"+ev.Object.GetName())
	}
	want := []string{"ns/p0", "ns/p0a", "ns/p2", "ns/p4", "ns/p6"}
	if !slices.Equal(initial, want) {
		t.Errorf("initial events %v, want %v", initial, want)
	}
}

// TestIndexAddedToRunningCache: a cache started without the index (a get came first) builds
// it when a caller asks for it, and watchers registered before keep their events.
func TestIndexAddedToRunningCache(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	create(t, key(res, "ns", "p1"), newPod("ns", "p1", "node-a"))
	create(t, key(res, "ns", "p2"), newPod("ns", "p2", "node-b"))
	c := startCache(t, Options{Prefix: prefix, Attrs: podAttrs})
	early, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer early.Stop()

	c.ensureIndexes([]string{nodeField})
	c.ensureIndexes([]string{nodeField}) // again: nothing changes
	if got := c.indexFields(); !slices.Equal(got, []string{nodeField}) {
		t.Fatalf("indexed fields %v", got)
	}
	verifyIndex(t, c)
	late, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Stop()
	if indexedWatchers(c, nodeField, "node-a") != 1 {
		t.Fatal("the watcher registered after the index is not in its list")
	}
	create(t, key(res, "ns", "p3"), newPod("ns", "p3", "node-a"))
	for _, w := range []*Watcher{early, late} {
		if ev := next(t, w); ev.Type != storage.Added || ev.Object.GetName() != "p3" {
			t.Fatalf("got %s %s", ev.Type, ev.Object.GetName())
		}
	}
	got, err := c.List(ctx, prefix, ListOptions{Predicate: onNode("node-a"), Consistent: true})
	if err != nil || !slices.Equal(names(got), []string{"ns/p1", "ns/p3"}) {
		t.Fatalf("list: %v %v", names(got), err)
	}
	verifyIndex(t, c)
}

// TestSetGetIndexes: Set.Get passes its fields to a new cache and adds them to an existing one.
func TestSetGetIndexes(t *testing.T) {
	s := NewSet(testCtx(t), Options{Store: testStore})
	_, p1 := testResource(t)
	if got := s.Get(p1, podAttrs, nodeField).indexFields(); !slices.Equal(got, []string{nodeField}) {
		t.Fatalf("new cache indexes %v", got)
	}
	_, p2 := testResource(t)
	c := s.Get(p2, podAttrs)
	if len(c.indexFields()) != 0 {
		t.Fatal("index without a field asked for")
	}
	if s.Get(p2, podAttrs, nodeField) != c || !slices.Equal(c.indexFields(), []string{nodeField}) {
		t.Fatalf("existing cache indexes %v", c.indexFields())
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Get(p2, podAttrs, nodeField) }); allocs != 0 {
		t.Errorf("Get of an indexed cache allocates %v times", allocs)
	}
}

// TestIndexAfterRelist: a re-list (the cache's watch fell behind a compaction) rebuilds the
// index from the new list, and a watcher whose node saw a change it missed is ended.
func TestIndexAfterRelist(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	create(t, key(res, "ns", "p1"), newPod("ns", "p1", "node-a"))
	create(t, key(res, "ns", "p2"), newPod("ns", "p2", "node-b"))
	gate := &gatedStore{Store: testStore, release: make(chan struct{}), opened: make(chan struct{}, 10)}
	c := startCache(t, Options{Prefix: prefix, Store: gate, Attrs: podAttrs, IndexFields: []string{nodeField}})
	wa, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode("node-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	wc, err := c.Watch(ctx, prefix, WatchOptions{Predicate: onNode("node-c")})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Stop()
	update(t, key(res, "ns", "p1"), func(o *unstructured.Unstructured) { o.Object["spec"] = map[string]any{"nodeName": "node-b"} })
	other, _ := testResource(t)
	cur := create(t, key(other, "", "o"), newObj("", "o", nil))
	if err := testStore.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	if ev := next(t, wa); ev.Type != storage.ErrorEvent {
		t.Fatalf("node-a watcher got %s, want the error of a missed change", ev.Type)
	}
	waitRev(t, c, cur)
	verifyIndex(t, c)
	got, err := c.List(ctx, prefix, ListOptions{Predicate: onNode("node-b")})
	if err != nil || !slices.Equal(names(got), []string{"ns/p1", "ns/p2"}) {
		t.Fatalf("node-b after the re-list: %v %v", names(got), err)
	}
	// node-c's watcher missed nothing and carries on.
	create(t, key(res, "ns", "p3"), newPod("ns", "p3", "node-c"))
	if ev := next(t, wc); ev.Type != storage.Added || ev.Object.GetName() != "p3" {
		t.Fatalf("node-c watcher: %s", ev.Type)
	}
}
