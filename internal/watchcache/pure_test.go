package watchcache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

func ev(rev int64) *Event { return &Event{Event: storage.Event{Type: storage.Modified, Revision: rev}} }

func revs(evs []*Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Revision
	}
	return out
}

// TestRingGrows: a full ring whose oldest event is younger than fresh doubles (up to max);
// a full ring whose newest quarter is older than fresh halves (down to min), keeping the newest
// events and moving start to the newest one it dropped.
func TestRingGrows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name     string
		gaps     []time.Duration // before each push of revisions 11, 12, ...
		capacity int
		since    int64 // the oldest revision a watch can still resume from
	}{
		{"fresh events: 4 → 8", []time.Duration{0, 0, 0, 0, time.Second}, 8, 10},
		{"fresh, capped at max 8", repeat(time.Second, 12), 8, 14},
		{"old events, full at min: fixed", []time.Duration{0, 0, 0, 0, time.Hour}, 4, 11},
		{"grown, then everything older than fresh: halves back to 4",
			append(repeat(0, 8), time.Hour), 4, 15},
		{"grown, only the oldest events stale: kept at 8",
			append(append(repeat(0, 6), time.Hour), 0, 0), 8, 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(4, 8, time.Minute, 10)
			now := t0
			for i, gap := range tc.gaps {
				now = now.Add(gap)
				r.push(ev(int64(11+i)), now)
			}
			if len(r.buf) != tc.capacity {
				t.Errorf("capacity %d, want %d", len(r.buf), tc.capacity)
			}
			if r.start != tc.since {
				t.Errorf("start %d, want %d", r.start, tc.since)
			}
			evs, ok := r.since(r.start)
			last := int64(10 + len(tc.gaps))
			if !ok || len(evs) == 0 || evs[len(evs)-1].Revision != last || evs[0].Revision != r.start+1 {
				t.Errorf("since(start): %v %v, want %d..%d", revs(evs), ok, r.start+1, last)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestRing(t *testing.T) {
	r := newRing(3, 3, 0, 10)
	if evs, ok := r.since(10); !ok || len(evs) != 0 {
		t.Fatalf("empty ring: %v %v", evs, ok)
	}
	if _, ok := r.since(9); ok {
		t.Fatal("since(9) on a ring starting at 10")
	}
	for _, rv := range []int64{11, 12, 12, 13} { // two events share revision 12 (one txn)
		r.push(ev(rv), time.Time{})
	}
	tests := []struct {
		since int64
		want  string
		ok    bool
	}{
		{10, "", false}, // 11 was evicted
		{11, "[12 12 13]", true},
		{12, "[13]", true},
		{13, "[]", true},
		{99, "[]", true},
	}
	for _, tt := range tests {
		evs, ok := r.since(tt.since)
		if ok != tt.ok || (ok && fmt.Sprint(revs(evs)) != tt.want) {
			t.Errorf("since(%d) = %v %v, want %s %v", tt.since, revs(evs), ok, tt.want, tt.ok)
		}
	}
	r.push(ev(14), time.Time{}) // evicts the first 12: resuming from 12 is still complete
	if evs, ok := r.since(12); !ok || fmt.Sprint(revs(evs)) != "[13 14]" {
		t.Errorf("after evicting half of 12: %v %v", revs(evs), ok)
	}
	r.reset(20)
	if _, ok := r.since(14); ok {
		t.Error("since(14) after reset(20)")
	}
}

// TestChangeMatchesFilterEvent checks the cache's per-watcher filtering against storage's
// FilterEvent for every event type and match combination.
func TestChangeMatchesFilterEvent(t *testing.T) {
	mk := func(app string, rev int64) *unstructured.Unstructured {
		o := newObj("ns", "x", map[string]string{"app": app})
		o.SetResourceVersion(fmt.Sprint(rev))
		return o
	}
	p := storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "a"})}
	for _, typ := range []storage.EventType{storage.Added, storage.Modified, storage.Deleted, storage.Bookmark} {
		for _, cur := range []string{"a", "b"} {
			for _, prev := range []string{"a", "b"} {
				sev := storage.Event{Type: typ, Key: "k", Object: mk(cur, 5), PrevObject: mk(prev, 4), Revision: 5}
				if typ == storage.Added {
					sev.PrevObject = nil
				}
				if typ == storage.Deleted {
					sev.Object = mk(prev, 5)
				}
				want, wantOK := storage.FilterEvent(sev, p)
				got := newChange(&Event{Event: sev}, storage.DefaultAttrs).forPredicate(p)
				name := fmt.Sprintf("%s cur=%s prev=%s", typ, cur, prev)
				if (got != nil) != wantOK {
					t.Errorf("%s: delivered %v, want %v", name, got != nil, wantOK)
					continue
				}
				if got == nil {
					continue
				}
				if got.Type != want.Type || got.Object.GetResourceVersion() != want.Object.GetResourceVersion() ||
					got.Object.GetLabels()["app"] != want.Object.GetLabels()["app"] {
					t.Errorf("%s: got %s rv=%s app=%s, want %s rv=%s app=%s", name, got.Type, got.Object.GetResourceVersion(),
						got.Object.GetLabels()["app"], want.Type, want.Object.GetResourceVersion(), want.Object.GetLabels()["app"])
				}
			}
		}
	}
}

func TestChangeSharesVariants(t *testing.T) {
	sev := storage.Event{Type: storage.Modified, Key: "k", Object: newObj("ns", "x", map[string]string{"app": "b"}),
		PrevObject: newObj("ns", "x", map[string]string{"app": "a"}), Revision: 9}
	calls := 0
	attrs := func(o *unstructured.Unstructured) (labels.Set, fields.Set) {
		calls++
		return storage.DefaultAttrs(o)
	}
	ch := newChange(&Event{Event: sev}, attrs)
	p := storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "a"})}
	first := ch.forPredicate(p)
	for range 100 {
		if ch.forPredicate(p) != first {
			t.Fatal("watchers with the same view got different events")
		}
	}
	if first.Type != storage.Deleted || calls != 2 {
		t.Fatalf("type %s, %d attribute extractions, want DELETED and 2", first.Type, calls)
	}
}

func TestEncodedOncePerFormat(t *testing.T) {
	e := ev(1)
	var calls atomic.Int32
	enc := func(format string) func(*Event) ([]byte, error) {
		return func(*Event) ([]byte, error) {
			calls.Add(1)
			return []byte(format), nil
		}
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			f := []string{"json", "table"}[i%2]
			b, err := e.Encoded(f, enc(f))
			if err != nil || string(b) != f {
				t.Errorf("Encoded(%s) = %q %v", f, b, err)
			}
		})
	}
	wg.Wait()
	if calls.Load() != 2 {
		t.Fatalf("%d encodings, want 2", calls.Load())
	}
}

// TestChangePrevFromIndex: a modification whose previous state is not decoded (a packed
// cache's live event) is matched against a field selector on indexed fields, and the name
// and namespace, from the previous state's index values; any other predicate needs the
// state itself (absent here, so it does not match).
func TestChangePrevFromIndex(t *testing.T) {
	cur := newPod("ns", "x", "node-a")
	sel := func(s string) storage.Predicate {
		fs, err := fields.ParseSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return storage.Predicate{Field: fs, Attrs: podAttrs}
	}
	for _, tc := range []struct {
		name     string
		prevNode string
		p        storage.Predicate
		want     storage.EventType // "" = not delivered
	}{
		{"same node", "node-a", sel("spec.nodeName=node-a"), storage.Modified},
		{"moved here", "node-b", sel("spec.nodeName=node-a"), storage.Added},
		{"elsewhere", "node-b", sel("spec.nodeName=node-c"), ""},
		{"moved away, the previous state absent: not sent", "node-c", sel("spec.nodeName=node-c"), ""},
		{"node and name", "node-a", sel("spec.nodeName=node-a,metadata.name=x"), storage.Modified},
		{"node and namespace, other name", "node-a", sel("spec.nodeName=node-a,metadata.name=y"), ""},
		{"not on a node", "", sel("spec.nodeName!=node-b"), storage.Modified},
		{"unindexed field: needs the state", "node-a", sel("spec.nodeName=node-a,status.phase!=x"), storage.Added},
		{"an empty label selector", "node-a", storage.Predicate{Label: labels.Everything(), Field: fields.OneTermEqualSelector(nodeField, "node-a"), Attrs: podAttrs}, storage.Modified},
		{"labels: need the state", "node-a", storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "a"}), Field: fields.OneTermEqualSelector(nodeField, "node-a"), Attrs: podAttrs}, ""},
	} {
		sev := storage.Event{Type: storage.Modified, Key: "k", Object: cur, Revision: 9}
		ch := newChange(&Event{Event: sev}, podAttrs).withPrevIndex([]string{nodeField}, []string{tc.prevNode})
		got := ch.forPredicate(tc.p)
		switch {
		case got == nil && tc.want != "":
			t.Errorf("%s: not delivered, want %s", tc.name, tc.want)
		case got != nil && got.Type != tc.want:
			t.Errorf("%s: %s, want %q", tc.name, got.Type, tc.want)
		}
	}
}
