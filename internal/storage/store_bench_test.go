package storage_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// The benchmarks run the store and, beside it, the same operations as raw etcd client calls
// on the same member (fsync on), so that the ratio store/raw is the store's own cost.

const benchWriters = 8

var benchSeq atomic.Int64

func benchPrefix(name string) string {
	return fmt.Sprintf("%sbench/%s-%d/", storage.Prefix, name, benchSeq.Add(1))
}

// benchObject is a ~1 KiB ConfigMap-like object.
func benchObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":              name,
			"namespace":         "default",
			"uid":               "6f1c2a1e-3b7d-4c55-9a8e-" + fmt.Sprintf("%012d", len(name)),
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":            map[string]any{"app": "bench", "tier": "web"},
			"annotations":       map[string]any{"kube.dev/note": strings.Repeat("a", 200)},
		},
		"data": map[string]any{"config": strings.Repeat("x", 600), "count": "0"},
	}}
}

// concurrently runs op b.N times from n goroutines and reports operations per second.
func concurrently(b *testing.B, n int, unit string, op func(i int64) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range n {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(int64(g)<<40 | i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

func BenchmarkCreate(b *testing.B) {
	s := storage.New(client)
	raw, _ := json.Marshal(benchObject("x").Object)
	b.Run("store", func(b *testing.B) {
		p := benchPrefix("create-store")
		concurrently(b, benchWriters, "creates/s", func(i int64) error {
			name := fmt.Sprintf("obj-%x", i)
			obj := benchObject(name)
			_, err := s.Create(b.Context(), p+name, obj)
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		p := benchPrefix("create-raw")
		concurrently(b, benchWriters, "creates/s", func(i int64) error {
			key := p + fmt.Sprintf("obj-%x", i)
			resp, err := client.Txn(b.Context()).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, string(raw))).
				Commit()
			if err == nil && !resp.Succeeded {
				err = fmt.Errorf("%s exists", key)
			}
			return err
		})
	})
}

func BenchmarkGet(b *testing.B) {
	s := storage.New(client)
	key := benchPrefix("get") + "obj"
	if _, err := s.Create(b.Context(), key, benchObject("obj")); err != nil {
		b.Fatal(err)
	}
	b.Run("store", func(b *testing.B) {
		concurrently(b, benchWriters, "gets/s", func(int64) error {
			_, err := s.Get(b.Context(), key)
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		concurrently(b, benchWriters, "gets/s", func(int64) error {
			_, err := client.Get(b.Context(), key)
			return err
		})
	})
}

func BenchmarkList500(b *testing.B) {
	s := storage.New(client)
	p := benchPrefix("list")
	for i := range 500 {
		name := fmt.Sprintf("obj-%03d", i)
		if _, err := s.Create(b.Context(), p+name, benchObject(name)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("store", func(b *testing.B) {
		concurrently(b, 1, "lists/s", func(int64) error {
			res, err := s.List(b.Context(), p, storage.ListOptions{})
			if err == nil && len(res.Items) != 500 {
				err = fmt.Errorf("%d items", len(res.Items))
			}
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		concurrently(b, 1, "lists/s", func(int64) error {
			_, err := client.Get(b.Context(), p, clientv3.WithPrefix())
			return err
		})
	})
}

func BenchmarkGuaranteedUpdate(b *testing.B) {
	s := storage.New(client)
	setup := func(b *testing.B, name string) []string {
		p := benchPrefix(name)
		keys := make([]string, benchWriters)
		for g := range keys {
			keys[g] = fmt.Sprintf("%sobj-%d", p, g)
			if _, err := s.Create(b.Context(), keys[g], benchObject("obj")); err != nil {
				b.Fatal(err)
			}
		}
		return keys
	}
	bump := func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		n, _, _ := unstructured.NestedString(cur.Object, "data", "count")
		return cur, unstructured.SetNestedField(cur.Object, n+"1", "data", "count")
	}
	// Each writer updates its own key: no conflicts, the cost of read-modify-write.
	b.Run("store", func(b *testing.B) {
		keys := setup(b, "update-store")
		concurrently(b, benchWriters, "updates/s", func(i int64) error {
			_, err := s.GuaranteedUpdate(b.Context(), keys[i>>40], storage.UpdateOptions{}, bump)
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		// What the store does without a cached state: read, then compare-and-swap.
		keys := setup(b, "update-raw")
		concurrently(b, benchWriters, "updates/s", func(i int64) error {
			key := keys[i>>40]
			resp, err := client.Get(b.Context(), key)
			if err != nil {
				return err
			}
			kv := resp.Kvs[0]
			val := strings.Replace(string(kv.Value), `"count":"`, `"count":"1`, 1)
			t, err := client.Txn(b.Context()).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
				Then(clientv3.OpPut(key, val)).
				Commit()
			if err == nil && !t.Succeeded {
				err = fmt.Errorf("conflict on %s", key)
			}
			return err
		})
	})
}
