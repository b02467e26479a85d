package storagetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ktypes "k8s.io/apimachinery/pkg/types"

	"kubeos.dev/kube/internal/storage"
)

func testCreate(t *testing.T, s Store) {
	ctx := t.Context()
	p := prefixFor(t)
	key := p + "a"

	obj := newObj("a", nil)
	obj.SetResourceVersion("12345") // a client's value: never stored
	got, err := s.Create(ctx, key, obj)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	rv := rvOf(t, got)
	resp, err := s.Client().Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", resp, err)
	}
	if kv := resp.Kvs[0]; kv.ModRevision != rv || kv.CreateRevision != rv {
		t.Errorf("returned resourceVersion %d, etcd mod/create revision %d/%d", rv, kv.ModRevision, kv.CreateRevision)
	}
	if cur := currentRevision(t, s); cur < rv {
		t.Errorf("current revision %d is behind the create's %d", cur, rv)
	}
	md, _ := storedValue(t, s, key)["metadata"].(map[string]any)
	if _, ok := md["resourceVersion"]; ok {
		t.Errorf("stored value carries metadata.resourceVersion: %v", md)
	}
	if md["name"] != "a" {
		t.Errorf("stored metadata %v, want name a", md)
	}

	tests := []struct {
		name string
		key  string
		obj  *unstructured.Unstructured
		want error
	}{
		{"existing key", key, newObj("a", map[string]string{"second": "true"}), storage.ErrAlreadyExists},
		{"nil object", p + "nil", nil, storage.ErrInvalidObject},
		{"empty object", p + "empty", &unstructured.Unstructured{}, storage.ErrInvalidObject},
		{"new key", p + "b", newObj("b", nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := s.Create(ctx, tt.key, tt.obj)
			wantErr(t, "create", err, tt.want)
			if tt.want == nil {
				if r := rvOf(t, out); r <= rv {
					t.Errorf("second create got revision %d, not above %d", r, rv)
				}
				return
			}
			var se *storage.Error
			if !errors.As(err, &se) || se.Key != tt.key {
				t.Errorf("error %#v does not name key %s", err, tt.key)
			}
		})
	}
	cur, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if rvOf(t, cur) != rv || len(cur.GetLabels()) != 0 {
		t.Errorf("the refused create changed the object: %v", cur.Object)
	}
}

func testGet(t *testing.T, s Store) {
	ctx := t.Context()
	p := prefixFor(t)

	_, err := s.Get(ctx, p+"missing")
	wantErr(t, "get missing", err, storage.ErrNotFound)
	var se *storage.Error
	if !errors.As(err, &se) || se.Key != p+"missing" {
		t.Errorf("error %#v does not name the key", err)
	}

	obj := newObj("a", map[string]string{"app": "web"})
	obj.Object["spec"] = map[string]any{"replicas": int64(3), "ratio": 0.5, "list": []any{"x", int64(1)}}
	want := mustCreate(t, s, p+"a", obj.DeepCopy())
	got, err := s.Get(ctx, p+"a")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("get returned\n%v\nwant\n%v", got.Object, want.Object)
	}
}

func testCount(t *testing.T, s Store) {
	ctx := t.Context()
	p := prefixFor(t)
	for _, k := range []string{"ns1/a", "ns1/b", "ns1/c", "ns10/a", "ns10/b", "ns1x"} {
		mustCreate(t, s, p+k, newObj(k, nil))
	}
	mustDelete(t, s, p+"ns1/c")
	tests := []struct {
		prefix string
		want   int64
	}{
		{p, 5},
		{p + "ns1/", 2},
		{p + "ns1", 2}, // a namespace, not a string prefix: ns10 and ns1x do not count
		{p + "ns10/", 2},
		{p + "none/", 0},
	}
	for _, tt := range tests {
		n, err := s.Count(ctx, tt.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if n != tt.want {
			t.Errorf("Count(%q) = %d, want %d", strings.TrimPrefix(tt.prefix, p), n, tt.want)
		}
	}
}

func testGuaranteedUpdate(t *testing.T, s Store) {
	t.Run("concurrent increments", func(t *testing.T) {
		ctx := t.Context()
		key := prefixFor(t) + "counter"
		obj := newObj("counter", nil)
		obj.Object["spec"] = map[string]any{"count": int64(0)}
		mustCreate(t, s, key, obj)

		const writers, each = 20, 10
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range each {
					out, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
						n, _, _ := unstructured.NestedInt64(cur.Object, "spec", "count")
						return cur, unstructured.SetNestedField(cur.Object, n+1, "spec", "count")
					})
					if err != nil {
						t.Errorf("update: %v", err)
						return
					}
					rv, _ := storage.Revision(out)
					mu.Lock()
					if seen[rv] {
						t.Errorf("two updates returned revision %d", rv)
					}
					seen[rv] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		got, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "count"); n != writers*each {
			t.Errorf("count = %d after %d increments: updates were lost", n, writers*each)
		}
		if rv := rvOf(t, got); !seen[rv] || len(seen) != writers*each {
			t.Errorf("final revision %d, %d distinct revisions returned", rv, len(seen))
		}
	})

	t.Run("preconditions", func(t *testing.T) {
		p := prefixFor(t)
		stale := func(rv int64) string { return fmt.Sprint(rv - 1) }
		current := func(rv int64) string { return fmt.Sprint(rv) }
		none := func(int64) string { return "" }
		tests := []struct {
			name string
			uid  string
			rv   func(int64) string
			want error
		}{
			{"none", "", none, nil},
			{"uid matches", "uid-x", none, nil},
			{"uid differs", "other", none, storage.ErrConflict},
			{"rv current", "", current, nil},
			{"rv stale", "", stale, storage.ErrConflict},
			{"uid matches rv stale", "uid-x", stale, storage.ErrConflict},
			{"uid differs rv current", "other", current, storage.ErrConflict},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := fmt.Sprintf("%s%d", p, i)
				created := mustCreate(t, s, key, newObj("x", nil))
				rv := rvOf(t, created)
				called := false
				out, err := s.GuaranteedUpdate(t.Context(), key, storage.UpdateOptions{
					Preconditions: &storage.Preconditions{UID: ktypes.UID(tt.uid), ResourceVersion: tt.rv(rv)},
				}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
					called = true
					setData("changed")(cur)
					return cur, nil
				})
				wantErr(t, "update", err, tt.want)
				got, _ := s.Get(t.Context(), key)
				if tt.want != nil {
					if called || rvOf(t, got) != rv {
						t.Errorf("a failed precondition still ran the update (called %v, rv %d → %d)", called, rv, rvOf(t, got))
					}
					return
				}
				if rvOf(t, out) <= rv || rvOf(t, got) != rvOf(t, out) {
					t.Errorf("update returned rv %d, stored %d, was %d", rvOf(t, out), rvOf(t, got), rv)
				}
			})
		}
	})

	t.Run("no-op keeps the revision", func(t *testing.T) {
		ctx := t.Context()
		key := prefixFor(t) + "a"
		rv := rvOf(t, mustCreate(t, s, key, newObj("a", nil)))
		tests := []struct {
			name string
			fn   storage.UpdateFunc
		}{
			{"unchanged", func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) { return cur, nil }},
			{"only resourceVersion changed", func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				cur.SetResourceVersion("1")
				return cur, nil
			}},
			{"same content rebuilt", func(*unstructured.Unstructured) (*unstructured.Unstructured, error) { return newObj("a", nil), nil }},
		}
		for _, tt := range tests {
			out, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, tt.fn)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			got, _ := s.Get(ctx, key)
			if rvOf(t, out) != rv || rvOf(t, got) != rv {
				t.Errorf("%s: no-op update returned rv %d, stored %d, want %d", tt.name, rvOf(t, out), rvOf(t, got), rv)
			}
		}
	})

	t.Run("allow create", func(t *testing.T) {
		ctx := t.Context()
		p := prefixFor(t)
		called := false
		_, err := s.GuaranteedUpdate(ctx, p+"a", storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			called = true
			return newObj("a", nil), nil
		})
		wantErr(t, "update of a missing key", err, storage.ErrNotFound)
		if called {
			t.Error("the update function ran for a missing key without AllowCreate")
		}
		out, err := s.GuaranteedUpdate(ctx, p+"a", storage.UpdateOptions{AllowCreate: true}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if cur != nil {
				return nil, fmt.Errorf("got current state %v for a missing key", cur.Object)
			}
			return newObj("a", nil), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, p+"a")
		if err != nil || rvOf(t, got) != rvOf(t, out) {
			t.Fatalf("created object: %v, rv %s, returned %s", err, got.GetResourceVersion(), out.GetResourceVersion())
		}
		// On an existing key, AllowCreate is an ordinary update.
		out2, err := s.GuaranteedUpdate(ctx, p+"a", storage.UpdateOptions{AllowCreate: true}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if cur == nil {
				return nil, errors.New("no current state for an existing key")
			}
			setData("2")(cur)
			return cur, nil
		})
		if err != nil || rvOf(t, out2) <= rvOf(t, out) {
			t.Fatalf("update with AllowCreate: %v", err)
		}
	})

	t.Run("errors pass through", func(t *testing.T) {
		ctx := t.Context()
		key := prefixFor(t) + "a"
		rv := rvOf(t, mustCreate(t, s, key, newObj("a", nil)))
		errBoom := errors.New("boom")
		_, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			setData("changed")(cur)
			return cur, fmt.Errorf("admission: %w", errBoom)
		})
		wantErr(t, "update", err, errBoom)
		got, _ := s.Get(ctx, key)
		if rvOf(t, got) != rv {
			t.Errorf("a failed update was written")
		}
	})

	t.Run("stale current", func(t *testing.T) {
		// Current comes from a cache: a stale copy may only cost a retry, never a wrong answer.
		ctx := t.Context()
		key := prefixFor(t) + "a"
		cached := mustCreate(t, s, key, newObj("a", nil))
		snapshot := cached.DeepCopy()
		fresh := mustUpdate(t, s, key, setData("2"))

		// Other goroutines read the cached object while updates use it (run with -race).
		done := make(chan struct{})
		var readers sync.WaitGroup
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					_ = cached.GetResourceVersion()
					_ = cached.GetLabels()
				}
			}
		})
		defer func() { close(done); readers.Wait() }()

		out, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{
			Current:       cached,
			Preconditions: &storage.Preconditions{ResourceVersion: fresh.GetResourceVersion()},
		}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			setLabels(map[string]string{"updated": "true"})(cur)
			return cur, nil
		})
		if err != nil {
			t.Fatalf("update with a stale cached state and a precondition on the stored one: %v", err)
		}
		if rvOf(t, out) <= rvOf(t, fresh) {
			t.Errorf("returned rv %d, not above %d", rvOf(t, out), rvOf(t, fresh))
		}
		if v, _, _ := unstructured.NestedString(out.Object, "data", "k"); v != "2" {
			t.Errorf("the update was applied to the stale state (data.k = %q)", v)
		}

		// A no-op on a stale cached state answers with the stored revision.
		noop, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{Current: cached}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return cur, nil
		})
		if err != nil || noop.GetResourceVersion() != out.GetResourceVersion() {
			t.Errorf("no-op on a stale cached state: rv %s, err %v; want rv %s", noop.GetResourceVersion(), err, out.GetResourceVersion())
		}

		// The update function failing on the cached state is retried on the stored one.
		_, err = s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{Current: cached}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if cur.GetLabels()["updated"] != "true" {
				return nil, errors.New("stale")
			}
			setData("3")(cur)
			return cur, nil
		})
		if err != nil {
			t.Errorf("update function refusing the stale cached state: %v", err)
		}
		if !reflect.DeepEqual(cached.Object, snapshot.Object) {
			t.Errorf("the store changed the cached object:\n%v\nwas\n%v", cached.Object, snapshot.Object)
		}
	})
}

func testDelete(t *testing.T, s Store) {
	t.Run("returns the last state", func(t *testing.T) {
		ctx := t.Context()
		key := prefixFor(t) + "a"
		mustCreate(t, s, key, newObj("a", nil))
		last := mustUpdate(t, s, key, setData("last"))
		out, err := s.Delete(ctx, key, storage.DeleteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(out.Object, "data", "k"); v != "last" || out.GetUID() != last.GetUID() {
			t.Errorf("delete returned %v, want the last state", out.Object)
		}
		if rvOf(t, out) <= rvOf(t, last) {
			t.Errorf("deleted object has rv %d, want the deletion's revision (above %d)", rvOf(t, out), rvOf(t, last))
		}
		_, err = s.Get(ctx, key)
		wantErr(t, "get after delete", err, storage.ErrNotFound)
		_, err = s.Delete(ctx, key, storage.DeleteOptions{})
		wantErr(t, "second delete", err, storage.ErrNotFound)
		if storedValue(t, s, key) != nil {
			t.Error("the key is still in etcd")
		}
	})

	t.Run("not found", func(t *testing.T) {
		_, err := s.Delete(t.Context(), prefixFor(t)+"missing", storage.DeleteOptions{})
		wantErr(t, "delete", err, storage.ErrNotFound)
	})

	t.Run("preconditions", func(t *testing.T) {
		p := prefixFor(t)
		errRefused := errors.New("refused")
		tests := []struct {
			name     string
			uid      string
			staleRV  bool
			validate func(*unstructured.Unstructured) error
			want     error
		}{
			{"uid matches", "uid-x", false, nil, nil},
			{"uid differs", "other", false, nil, storage.ErrConflict},
			{"rv current", "", false, nil, nil},
			{"rv stale", "", true, nil, storage.ErrConflict},
			{"validate refuses", "", false, func(*unstructured.Unstructured) error { return errRefused }, errRefused},
			{"validate sees the state", "", false, func(cur *unstructured.Unstructured) error {
				if cur.GetName() != "x" {
					return fmt.Errorf("validate got %v", cur.Object)
				}
				return nil
			}, nil},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := fmt.Sprintf("%s%d", p, i)
				created := mustCreate(t, s, key, newObj("x", nil))
				rv := created.GetResourceVersion()
				if tt.staleRV {
					mustUpdate(t, s, key, setData("newer"))
				}
				_, err := s.Delete(t.Context(), key, storage.DeleteOptions{
					Preconditions: &storage.Preconditions{UID: ktypes.UID(tt.uid), ResourceVersion: rv},
					Validate:      tt.validate,
				})
				wantErr(t, "delete", err, tt.want)
				_, err = s.Get(t.Context(), key)
				if tt.want == nil {
					wantErr(t, "get after delete", err, storage.ErrNotFound)
				} else if err != nil {
					t.Errorf("a refused delete removed the object: %v", err)
				}
			})
		}
	})
}

func testTooLarge(t *testing.T, s Store) {
	ctx := t.Context()
	p := prefixFor(t)
	big := strings.Repeat("x", storage.MaxValueSize+1)

	obj := newObj("big", nil)
	obj.Object["data"] = map[string]any{"k": big}
	_, err := s.Create(ctx, p+"big", obj)
	wantErr(t, "create", err, storage.ErrTooLarge)
	if n, _ := s.Count(ctx, p); n != 0 {
		t.Errorf("a refused create wrote %d keys", n)
	}

	key := p + "a"
	rv := rvOf(t, mustCreate(t, s, key, newObj("a", nil)))
	_, err = s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		setData(big)(cur)
		return cur, nil
	})
	wantErr(t, "update", err, storage.ErrTooLarge)
	got, err := s.Get(ctx, key)
	if err != nil || rvOf(t, got) != rv {
		t.Errorf("a refused update changed the object: %v", err)
	}

	// Just below the limit is fine.
	obj = newObj("almost", nil)
	obj.Object["data"] = map[string]any{"k": big[:storage.MaxValueSize-1024]}
	if _, err := s.Create(ctx, p+"almost", obj); err != nil {
		t.Errorf("create of a value just below the limit: %v", err)
	}
}
