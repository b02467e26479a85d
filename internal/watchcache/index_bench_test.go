package watchcache

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

// The node benchmarks model 5,000 node agents, each watching and listing its own pods with
// fieldSelector=spec.nodeName=node-<i>, over 20,000 pods (4 per node), with and without the
// spec.nodeName index.
const (
	benchNodes       = 5000
	benchPodsPerNode = 4
	benchPodsRes     = "bench-nodepods"
)

// benchPodAttrs computes the selectable fields of upstream's pods (as the Pod kind does).
func benchPodAttrs(obj *unstructured.Unstructured) (labels.Set, fields.Set) {
	l, f := storage.DefaultAttrs(obj)
	o := obj.Object
	for _, p := range [][]string{{"spec", "nodeName"}, {"spec", "restartPolicy"}, {"spec", "schedulerName"},
		{"spec", "serviceAccountName"}, {"status", "phase"}, {"status", "nominatedNodeName"}} {
		f[p[0]+"."+p[1]], _, _ = unstructured.NestedString(o, p...)
	}
	return l, f
}

func benchPod(i int) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": fmt.Sprintf("pod-%05d", i), "namespace": "default", "uid": fmt.Sprintf("uid-%d", i),
			"labels": map[string]any{"app": "bench"}},
		"spec": map[string]any{"nodeName": fmt.Sprintf("node-%d", i%benchNodes), "restartPolicy": "Always", "schedulerName": "default-scheduler",
			"containers": []any{map[string]any{"name": "c", "image": "registry.k8s.io/pause:3.10",
				"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "500Mi"}}}}},
		"status": map[string]any{"phase": "Running"},
	}
}

var benchPodsOnce sync.Once

// benchPodsFixture writes the pods to etcd once per process (raw transactions, the storage
// encoding) and returns their prefix.
func benchPodsFixture(b *testing.B) string {
	prefix := storage.ResourcePrefix("test.kube.dev", benchPodsRes)
	var err error
	benchPodsOnce.Do(func() {
		ctx := context.Background()
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(4)
		const batch = 128
		n := benchNodes * benchPodsPerNode
		for first := 0; first < n; first += batch {
			g.Go(func() error {
				ops := make([]clientv3.Op, 0, batch)
				for i := first; i < min(first+batch, n); i++ {
					data, err := json.Marshal(benchPod(i))
					if err != nil {
						return err
					}
					ops = append(ops, clientv3.OpPut(key(benchPodsRes, "default", fmt.Sprintf("pod-%05d", i)), string(data)))
				}
				_, err := testClient.Txn(gctx).Then(ops...).Commit()
				return err
			})
		}
		err = g.Wait()
	})
	if err != nil {
		b.Fatal(err)
	}
	return prefix
}

func benchNodeCache(b *testing.B, indexed bool) *Cache {
	o := Options{Prefix: benchPodsFixture(b), Attrs: benchPodAttrs, BookmarkInterval: time.Hour, WatcherBufferSize: 1000,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if indexed {
		o.IndexFields = []string{nodeField}
	}
	return startCache(b, o)
}

func benchOnNode(i int) storage.Predicate {
	return storage.Predicate{Field: fields.OneTermEqualSelector(nodeField, fmt.Sprintf("node-%d", i)), Attrs: benchPodAttrs}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNodeWatchers: each iteration applies one status change of a pod to the cache
// (straight to the dispatcher's apply, without etcd, so that only the cache's work counts;
// the pod's node changes round-robin) and waits until its node's watcher has it. cpu-ns/op
// is the whole process's CPU (the 5,000 reader goroutines included).
func BenchmarkNodeWatchers(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		name := "indexed"
		if !indexed {
			name = "scan"
		}
		b.Run(name, func(b *testing.B) {
			ctx := testCtx(b)
			c := benchNodeCache(b, indexed)
			got := make([]chan int64, benchNodes)
			ws := make([]*Watcher, benchNodes)
			var readers sync.WaitGroup
			defer func() {
				for _, w := range ws {
					if w != nil {
						w.Stop()
					}
				}
				readers.Wait()
			}()
			for i := range benchNodes {
				w, err := c.Watch(ctx, c.Prefix(), WatchOptions{Predicate: benchOnNode(i)})
				if err != nil {
					b.Fatal(err)
				}
				ws[i] = w
				got[i] = make(chan int64, 1)
				readers.Go(func() {
					for ev := range w.ResultChan() {
						switch ev.Type {
						case storage.Modified:
							got[i] <- ev.Revision
						case storage.ErrorEvent:
							b.Errorf("node-%d watcher ended: %v", i, ev.Err)
						}
					}
				})
			}
			// The pods as the cache holds them, so that events carry their previous state.
			pods := make([]*unstructured.Unstructured, benchNodes)
			for i := range benchNodes {
				obj, err := c.Get(ctx, key(benchPodsRes, "default", fmt.Sprintf("pod-%05d", i)), 0)
				if err != nil {
					b.Fatal(err)
				}
				pods[i] = obj
			}
			rev := c.Revision() + 1_000_000 // above anything etcd sends this cache
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				node := i % benchNodes
				prev := pods[node]
				cur := prev.DeepCopy()
				rev++
				cur.SetResourceVersion(fmt.Sprint(rev))
				_ = unstructured.SetNestedField(cur.Object, fmt.Sprint(i), "status", "message")
				c.apply(storage.Event{Type: storage.Modified, Key: key(benchPodsRes, "default", prev.GetName()), Object: cur, PrevObject: prev, Revision: rev})
				pods[node] = cur
				select {
				case r := <-got[node]:
					if r != rev {
						b.Fatalf("node-%d got revision %d, want %d", node, r, rev)
					}
				case <-time.After(time.Minute):
					b.Fatalf("node-%d got no event within a minute", node)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkNodeList: one node agent's list of its pods (4 of 20,000), and its watch-list
// (initial events up to the bookmark), with and without the index.
func BenchmarkNodeList(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		name := "indexed"
		if !indexed {
			name = "scan"
		}
		b.Run(name+"/list", func(b *testing.B) {
			ctx := testCtx(b)
			c := benchNodeCache(b, indexed)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := c.List(ctx, c.Prefix(), ListOptions{Predicate: benchOnNode(i % benchNodes)})
				if err != nil || len(res.Items) != benchPodsPerNode {
					b.Fatalf("list: %v items, %v", len(res.Items), err)
				}
				i++
			}
		})
		b.Run(name+"/watch-list", func(b *testing.B) {
			ctx := testCtx(b)
			c := benchNodeCache(b, indexed)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w, err := c.Watch(ctx, c.Prefix(), WatchOptions{SendInitialEvents: true, Bookmarks: true, Predicate: benchOnNode(i % benchNodes)})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for ev := range w.ResultChan() {
					if ev.InitialEventsEnd {
						break
					}
					if ev.Type != storage.Added {
						b.Fatalf("initial event %s %v", ev.Type, ev.Err)
					}
					n++
				}
				w.Stop()
				if n != benchPodsPerNode {
					b.Fatalf("%d initial events", n)
				}
				i++
			}
		})
	}
}
