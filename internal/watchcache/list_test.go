package watchcache

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

func names(res *storage.ListResult) []string {
	out := make([]string, len(res.Items))
	for i, o := range res.Items {
		out[i] = o.GetNamespace() + "/" + o.GetName()
	}
	return out
}

func TestListRevisionZeroConsistentAndNotOlderThan(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	create(t, key(res, "a", "x"), newObj("a", "x", nil))
	c := startCache(t, Options{Prefix: prefix})

	got, err := c.List(ctx, prefix, ListOptions{})
	if err != nil || len(got.Items) != 1 || got.Revision == 0 {
		t.Fatalf("RV=0 list: %v %v", got, err)
	}

	// Consistent: a write just acknowledged by storage is in the list, and the list's
	// revision is at least storage's.
	rev := create(t, key(res, "b", "y"), newObj("b", "y", nil))
	got, err = c.List(ctx, prefix, ListOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision < rev || len(got.Items) != 2 {
		t.Fatalf("consistent list at %d with %v, want >= %d with 2 items", got.Revision, names(got), rev)
	}
	if want := []string{"a/x", "b/y"}; fmt.Sprint(names(got)) != fmt.Sprint(want) {
		t.Fatalf("items %v, want %v sorted by key", names(got), want)
	}

	// Consistent on an idle resource: other resources write, this cache must still reach
	// storage's revision through the progress notification.
	other, _ := testResource(t)
	orev := create(t, key(other, "", "z"), newObj("", "z", nil))
	got, err = c.List(ctx, prefix, ListOptions{Consistent: true})
	if err != nil || got.Revision < orev {
		t.Fatalf("idle consistent list at %d (err %v), want >= %d", got.Revision, err, orev)
	}

	// Not older than.
	rev = create(t, key(res, "a", "w"), newObj("a", "w", nil))
	got, err = c.List(ctx, storage.NamespacePrefix("test.kube.dev", res, "a"), ListOptions{Revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision < rev || fmt.Sprint(names(got)) != "[a/w a/x]" {
		t.Fatalf("not-older-than list at %d: %v", got.Revision, names(got))
	}

	// Get.
	obj, err := c.Get(ctx, key(res, "a", "w"), rev)
	if err != nil || obj.GetName() != "w" {
		t.Fatalf("Get: %v %v", obj, err)
	}
	if _, err := c.Get(ctx, key(res, "a", "nope"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
}

func TestListFutureRevision(t *testing.T) {
	ctx := testCtx(t)
	_, prefix := testResource(t)
	c := startCache(t, Options{Prefix: prefix, WaitTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := c.List(ctx, prefix, ListOptions{Revision: c.Revision() + 1_000_000})
	if !errors.Is(err, storage.ErrFutureRevision) {
		t.Fatalf("err %v, want ErrFutureRevision", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("returned after %v, want a bounded wait", d)
	}
}

func TestListPaging(t *testing.T) {
	ctx := testCtx(t)
	res, prefix := testResource(t)
	for i := range 25 {
		create(t, key(res, "ns", fmt.Sprintf("o%02d", i)), newObj("ns", fmt.Sprintf("o%02d", i), map[string]string{"even": fmt.Sprint(i%2 == 0)}))
	}
	c := startCache(t, Options{Prefix: prefix})
	var all []string
	opts := ListOptions{Limit: 10}
	var rev int64
	for page := 0; ; page++ {
		got, err := c.List(ctx, prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			rev = got.Revision
			if got.RemainingItemCount == nil || *got.RemainingItemCount != 15 {
				t.Fatalf("remaining %v, want 15", got.RemainingItemCount)
			}
			// Writes after the first page must not show in later pages.
			create(t, key(res, "ns", "o05a"), newObj("ns", "o05a", nil))
			create(t, key(res, "ns", "o99"), newObj("ns", "o99", nil))
			del(t, key(res, "ns", "o20"))
		} else if got.Revision != rev {
			t.Fatalf("page %d at revision %d, want %d", page, got.Revision, rev)
		}
		all = append(all, names(got)...)
		if got.Continue == "" {
			break
		}
		opts.Continue = got.Continue
	}
	if len(all) != 25 || all[0] != "ns/o00" || all[24] != "ns/o24" {
		t.Fatalf("pages gave %d items: %v", len(all), all)
	}

	// With a selector, pages hold matching items only.
	sel := labels.SelectorFromSet(labels.Set{"even": "true"})
	got, err := c.List(ctx, prefix, ListOptions{Limit: 5, Revision: rev, Predicate: storage.Predicate{Label: sel}})
	if err != nil || len(got.Items) != 5 || got.Continue == "" || got.RemainingItemCount != nil {
		t.Fatalf("selector page: %v %v", got, err)
	}

	// A token the cache has no snapshot for is served by storage at its exact revision.
	sres, err := testStore.List(ctx, prefix, storage.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	got, err = c.List(ctx, prefix, ListOptions{Limit: 3, Continue: sres.Continue})
	if err != nil || got.Revision != sres.Revision || names(got)[0] != "ns/o03" {
		t.Fatalf("fallback page: %v %v", got, err)
	}

	if _, err := c.List(ctx, prefix, ListOptions{Continue: "garbage!"}); !errors.Is(err, storage.ErrInvalidContinue) {
		t.Fatalf("bad token: %v", err)
	}
}
