package storagetest

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

func testList(t *testing.T, s Store) {
	t.Run("prefix isolation and order", func(t *testing.T) { testListPrefix(t, s) })
	t.Run("paging", func(t *testing.T) { testListPaging(t, s) })
	t.Run("revisions", func(t *testing.T) { testListRevisions(t, s) })
	t.Run("compacted", func(t *testing.T) { testListCompacted(t, s) })
	t.Run("invalid continue", func(t *testing.T) { testListInvalidContinue(t, s) })
	t.Run("predicates", func(t *testing.T) { testListPredicates(t, s) })
}

func testListPrefix(t *testing.T, s Store) {
	p := prefixFor(t)
	keys := []string{"ns1/b", "ns10/a", "ns1/a", "ns1x", "ns2/a", "ns0/z"}
	for _, k := range keys {
		mustCreate(t, s, p+k, newObj(k, nil))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{p, []string{"ns0/z", "ns1/a", "ns1/b", "ns10/a", "ns1x", "ns2/a"}},
		{p + "ns1/", []string{"ns1/a", "ns1/b"}},
		{p + "ns1", []string{"ns1/a", "ns1/b"}},
		{p + "ns10/", []string{"ns10/a"}},
		{p + "ns3/", []string{}},
	}
	for _, tt := range tests {
		for _, limit := range []int64{0, 1, 4} {
			got := listAll(t, s, tt.prefix, storage.ListOptions{Limit: limit})
			if n := names(got); !slices.Equal(n, tt.want) {
				t.Errorf("List(%q, limit %d) = %v, want %v", strings.TrimPrefix(tt.prefix, p), limit, n, tt.want)
			}
		}
	}

	// Many keys created in random order come back sorted.
	p2 := prefixFor(t)
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("k%03d", i))
	}
	for _, i := range rand.Perm(len(want)) {
		mustCreate(t, s, p2+want[i], newObj(want[i], nil))
	}
	res, err := s.List(t.Context(), p2, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := names(res.Items); !slices.Equal(n, want) {
		t.Errorf("list not sorted by key: %v", n)
	}
}

// listAll reads every page and checks that they share one revision.
func listAll(t *testing.T, s Store, prefix string, o storage.ListOptions) []*unstructured.Unstructured {
	t.Helper()
	var items []*unstructured.Unstructured
	var rev int64
	for {
		res, err := s.List(t.Context(), prefix, o)
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		if o.Limit > 0 && int64(len(res.Items)) > o.Limit {
			t.Fatalf("page of %d items with limit %d", len(res.Items), o.Limit)
		}
		if rev != 0 && res.Revision != rev {
			t.Fatalf("page read at revision %d, the first at %d", res.Revision, rev)
		}
		rev = res.Revision
		items = append(items, res.Items...)
		if res.Continue == "" {
			if res.RemainingItemCount != nil {
				t.Errorf("last page says %d items remain", *res.RemainingItemCount)
			}
			return items
		}
		o.Continue = res.Continue
	}
}

func testListPaging(t *testing.T, s Store) {
	ctx := t.Context()
	p := prefixFor(t)
	const total, limit = 25, 7
	want := map[string]string{} // name → resourceVersion
	for i := range total {
		n := fmt.Sprintf("item-%02d", i)
		want[n] = mustCreate(t, s, p+n, newObj(n, nil)).GetResourceVersion()
	}
	o := storage.ListOptions{Limit: limit}
	var got []*unstructured.Unstructured
	var rev int64
	for page := 0; ; page++ {
		res, err := s.List(ctx, p, o)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if page == 0 {
			rev = res.Revision
		} else if res.Revision != rev {
			t.Fatalf("page %d read at revision %d, the first page at %d", page, res.Revision, rev)
		}
		got = append(got, res.Items...)
		switch {
		case res.Continue == "" && len(got) != total:
			t.Fatalf("no continue token after %d of %d items", len(got), total)
		case res.Continue != "" && len(res.Items) != limit:
			t.Fatalf("page %d has %d items and a continue token", page, len(res.Items))
		case res.Continue != "":
			if res.RemainingItemCount == nil || *res.RemainingItemCount != int64(total-len(got)) {
				t.Errorf("page %d: remainingItemCount %v, want %d", page, res.RemainingItemCount, total-len(got))
			}
		}
		if res.Continue == "" {
			break
		}
		o.Continue = res.Continue
		// Writes between pages must not show: before, inside and after what is left to read.
		mustCreate(t, s, p+fmt.Sprintf("item-%02d-new", 8*page+9), newObj("new", nil))
		mustCreate(t, s, p+fmt.Sprintf("zz-%d", page), newObj("new", nil))
		mustCreate(t, s, p+fmt.Sprintf("a-%d", page), newObj("new", nil))
		mustUpdate(t, s, p+fmt.Sprintf("item-%02d", 22-page), setData("changed"))
		mustDelete(t, s, p+fmt.Sprintf("item-%02d", 15+page))
	}
	if len(got) != total {
		t.Fatalf("paging returned %d items, want %d: %v", len(got), total, names(got))
	}
	for i, it := range got {
		n := fmt.Sprintf("item-%02d", i)
		if it.GetName() != n || it.GetResourceVersion() != want[n] {
			t.Errorf("item %d is %s@%s, want %s@%s", i, it.GetName(), it.GetResourceVersion(), n, want[n])
		}
	}
	// A limit at or above the size needs no second page.
	for _, l := range []int64{total, total + 1} {
		res, err := s.List(ctx, p, storage.ListOptions{Limit: l, Revision: rev, Exact: true})
		if err != nil || len(res.Items) != total || res.Continue != "" {
			t.Errorf("limit %d: %d items, continue %q, err %v", l, len(res.Items), res.Continue, err)
		}
	}
}

func testListRevisions(t *testing.T, s Store) {
	p := prefixFor(t)
	r1 := mustCreate(t, s, p+"a", newObj("a", nil)).GetResourceVersion()
	r2 := mustUpdate(t, s, p+"a", setData("2")).GetResourceVersion()
	r3 := mustCreate(t, s, p+"b", newObj("b", nil)).GetResourceVersion()
	r4 := mustDelete(t, s, p+"a").GetResourceVersion()
	rev := func(s string) int64 {
		n, _ := storage.ParseRevision(s)
		return n
	}
	cur := currentRevision(t, s)
	tests := []struct {
		name    string
		o       storage.ListOptions
		want    []string // name@rv
		wantRev int64    // 0: at least cur
		wantErr error
	}{
		{"exact r1", storage.ListOptions{Revision: rev(r1), Exact: true}, []string{"a@" + r1}, rev(r1), nil},
		{"exact r2", storage.ListOptions{Revision: rev(r2), Exact: true}, []string{"a@" + r2}, rev(r2), nil},
		{"exact r3", storage.ListOptions{Revision: rev(r3), Exact: true}, []string{"a@" + r2, "b@" + r3}, rev(r3), nil},
		{"exact r4", storage.ListOptions{Revision: rev(r4), Exact: true}, []string{"b@" + r3}, rev(r4), nil},
		{"exact r1 paged", storage.ListOptions{Revision: rev(r3), Exact: true, Limit: 1}, []string{"a@" + r2}, rev(r3), nil},
		{"latest", storage.ListOptions{}, []string{"b@" + r3}, 0, nil},
		{"not older than r1", storage.ListOptions{Revision: rev(r1)}, []string{"b@" + r3}, 0, nil},
		{"not older than current", storage.ListOptions{Revision: cur}, []string{"b@" + r3}, 0, nil},
		{"not older than the future", storage.ListOptions{Revision: cur + 1000}, nil, 0, storage.ErrFutureRevision},
		{"exact future", storage.ListOptions{Revision: cur + 1000, Exact: true}, nil, 0, storage.ErrFutureRevision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.List(t.Context(), p, tt.o)
			wantErr(t, "list", err, tt.wantErr)
			if err != nil {
				return
			}
			var got []string
			for _, it := range res.Items {
				got = append(got, it.GetName()+"@"+it.GetResourceVersion())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("items %v, want %v", got, tt.want)
			}
			if (tt.wantRev != 0 && res.Revision != tt.wantRev) || (tt.wantRev == 0 && res.Revision < cur) {
				t.Errorf("list revision %d, want %d (current %d)", res.Revision, tt.wantRev, cur)
			}
		})
	}
}

func testListCompacted(t *testing.T, s Store) {
	ctx := t.Context()
	p := prefixFor(t)
	old := rvOf(t, mustCreate(t, s, p+"a", newObj("a", nil)))
	mustCreate(t, s, p+"b", newObj("b", nil))
	page, err := s.List(ctx, p, storage.ListOptions{Limit: 1})
	if err != nil || page.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, page.Continue)
	}
	mustUpdate(t, s, p+"a", setData("2"))
	cur := currentRevision(t, s)
	if err := s.Compact(ctx, cur); err != nil {
		t.Fatalf("compact: %v", err)
	}
	_, err = s.List(ctx, p, storage.ListOptions{Revision: old, Exact: true})
	wantErr(t, "exact list at a compacted revision", err, storage.ErrCompacted)
	_, err = s.List(ctx, p, storage.ListOptions{Continue: page.Continue, Limit: 1})
	wantErr(t, "continue at a compacted revision", err, storage.ErrCompacted)
	res, err := s.List(ctx, p, storage.ListOptions{Revision: cur, Exact: true})
	if err != nil || len(res.Items) != 2 {
		t.Fatalf("list at the compaction revision: %v", err)
	}
	if _, err := s.List(ctx, p, storage.ListOptions{Revision: old}); err != nil {
		t.Errorf("not-older-than list at a compacted revision reads the latest state: %v", err)
	}
}

func testListInvalidContinue(t *testing.T, s Store) {
	p := prefixFor(t)
	for _, n := range []string{"a/1", "a/2", "b/1", "b/2"} {
		mustCreate(t, s, p+n, newObj(n, nil))
	}
	first, err := s.List(t.Context(), p+"a/", storage.ListOptions{Limit: 1})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v", err)
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, prefix, token string
	}{
		{"not base64", p + "a/", "%%%"},
		{"not json", p + "a/", b64("not json")},
		{"zero revision", p + "a/", b64(`{"v":"meta.k8s.io/v1","rv":0,"start":"2"}`)},
		{"unknown version", p + "a/", b64(`{"v":"other/v9","rv":5,"start":"2"}`)},
		{"another list's token", p + "b/", first.Continue},
		{"parent list's token", p, first.Continue},
		{"escapes the prefix", p + "a/", storage.EncodeContinue(first.Revision, p+"a/../b/", p+"a/")},
		{"absolute start", p + "a/", storage.EncodeContinue(first.Revision, "/registry/other", p+"a/")},
	}
	for _, tt := range tests {
		_, err := s.List(t.Context(), tt.prefix, storage.ListOptions{Limit: 1, Continue: tt.token})
		wantErr(t, tt.name, err, storage.ErrInvalidContinue)
	}
	// The genuine token still works.
	res, err := s.List(t.Context(), p+"a/", storage.ListOptions{Limit: 1, Continue: first.Continue})
	if err != nil || len(res.Items) != 1 || res.Items[0].GetName() != "a/2" {
		t.Errorf("genuine token: %v", err)
	}
}

func testListPredicates(t *testing.T, s Store) {
	p := prefixFor(t)
	for i := range 20 {
		n := fmt.Sprintf("item-%02d", i)
		tier := "db"
		if i%2 == 0 {
			tier = "web"
		}
		mustCreate(t, s, p+n, newObj(n, map[string]string{"tier": tier}))
	}
	nameList := func(idx ...int) []string {
		out := []string{}
		for _, i := range idx {
			out = append(out, fmt.Sprintf("item-%02d", i))
		}
		return out
	}
	tests := []struct {
		name   string
		label  string
		field  string
		limits []int64
		want   []string
	}{
		{"label", "tier=web", "", []int64{0, 1, 3, 10, 11}, nameList(0, 2, 4, 6, 8, 10, 12, 14, 16, 18)},
		{"field", "", "metadata.name=item-07", []int64{0, 1, 2}, nameList(7)},
		{"label and field", "tier=db", "metadata.name!=item-07", []int64{0, 4}, nameList(1, 3, 5, 9, 11, 13, 15, 17, 19)},
		{"set-based label", "tier in (web),tier notin (db)", "metadata.namespace=default", []int64{7}, nameList(0, 2, 4, 6, 8, 10, 12, 14, 16, 18)},
		{"nothing matches", "tier=none", "", []int64{0, 5}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := labels.Parse(tt.label)
			if err != nil {
				t.Fatal(err)
			}
			fs, err := fields.ParseSelector(tt.field)
			if err != nil {
				t.Fatal(err)
			}
			for _, limit := range tt.limits {
				o := storage.ListOptions{Limit: limit, Predicate: storage.Predicate{Label: ls, Field: fs}}
				got := listAll(t, s, p, o)
				if n := names(got); !slices.Equal(n, tt.want) {
					t.Errorf("limit %d: %v, want %v", limit, n, tt.want)
				}
			}
		})
	}
}
