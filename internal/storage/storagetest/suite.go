package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// Store lists the methods of *storage.Store the suite uses.
type Store interface {
	Create(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Get(ctx context.Context, key string) (*unstructured.Unstructured, error)
	List(ctx context.Context, prefix string, o storage.ListOptions) (*storage.ListResult, error)
	Count(ctx context.Context, prefix string) (int64, error)
	GuaranteedUpdate(ctx context.Context, key string, o storage.UpdateOptions, fn storage.UpdateFunc) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, key string, o storage.DeleteOptions) (*unstructured.Unstructured, error)
	Watch(ctx context.Context, prefix string, o storage.WatchOptions) (storage.Watcher, error)
	CurrentRevision(ctx context.Context) (int64, error)
	Compact(ctx context.Context, rev int64) error
	RequestProgress(ctx context.Context) error
	// Client is the etcd client under the store: the suite reads raw values through it and
	// runs Compactors on it.
	Client() *clientv3.Client
}

var _ Store = (*storage.Store)(nil)

// Run runs the conformance suite. newStore returns a store on the backend under test; it is
// called once per test and may return the same store every time.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"Create", testCreate},
		{"Get", testGet},
		{"List", testList},
		{"Count", testCount},
		{"GuaranteedUpdate", testGuaranteedUpdate},
		{"Delete", testDelete},
		{"Watch", testWatch},
		{"TooLarge", testTooLarge},
		// Last: it compacts the cluster on a timer while it runs.
		{"Compactor", testCompactor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

// wait bounds every wait for a condition. Generous: the suite runs on loaded CI machines.
const wait = 30 * time.Second

var seq atomic.Int64

// prefixFor returns a key prefix, ending in "/", that no other test uses.
func prefixFor(t *testing.T) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%sstoragetest/%s-%d-%d/", storage.Prefix, name, time.Now().UnixNano(), seq.Add(1))
}

// newObj is a small ConfigMap-like object.
func newObj(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      name,
			"namespace": "default",
			"uid":       "uid-" + name,
		},
		"data": map[string]any{"k": "v"},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func rvOf(t *testing.T, obj *unstructured.Unstructured) int64 {
	t.Helper()
	if obj == nil {
		t.Fatal("nil object")
	}
	rv, err := storage.Revision(obj)
	if err != nil || rv <= 0 {
		t.Fatalf("object %s has resourceVersion %q: %v", obj.GetName(), obj.GetResourceVersion(), err)
	}
	return rv
}

func mustCreate(t *testing.T, s Store, key string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Create(t.Context(), key, obj)
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return out
}

// mustUpdate applies mutate through GuaranteedUpdate and returns the new state.
func mustUpdate(t *testing.T, s Store, key string, mutate func(obj *unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	out, err := s.GuaranteedUpdate(t.Context(), key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		mutate(cur)
		return cur, nil
	})
	if err != nil {
		t.Fatalf("update %s: %v", key, err)
	}
	return out
}

func setData(v string) func(*unstructured.Unstructured) {
	return func(obj *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(obj.Object, v, "data", "k")
	}
}

func setLabels(l map[string]string) func(*unstructured.Unstructured) {
	return func(obj *unstructured.Unstructured) { obj.SetLabels(l) }
}

func mustDelete(t *testing.T, s Store, key string) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Delete(t.Context(), key, storage.DeleteOptions{})
	if err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
	return out
}

func currentRevision(t *testing.T, s Store) int64 {
	t.Helper()
	rev, err := s.CurrentRevision(t.Context())
	if err != nil {
		t.Fatalf("current revision: %v", err)
	}
	return rev
}

// wantErr fails unless err wraps want (nil: no error).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// storedValue reads the raw value of key from etcd.
func storedValue(t *testing.T, s Store, key string) map[string]any {
	t.Helper()
	resp, err := s.Client().Get(t.Context(), key)
	if err != nil {
		t.Fatalf("raw get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	m := map[string]any{}
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		t.Fatalf("stored value of %s is not JSON: %v", key, err)
	}
	return m
}

func names(items []*unstructured.Unstructured) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.GetName()
	}
	return out
}
