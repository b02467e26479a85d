package watchcache

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// BenchmarkFanout measures the delivery of one change to many watchers of one resource: each
// iteration writes one object through storage (etcd) and waits until every watcher has
// received (and "encoded", through Event.Encoded) the event. Reported: the latency from the
// write's start to each delivery (p50, p99), the spread from the first to each delivery
// (fanout-p99), and the heap per registered watcher.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
}

func benchFanout(b *testing.B, n int) {
	ctx := testCtx(b)
	res, prefix := testResource(b)
	k := key(res, "ns", "x")
	create(b, k, newObj("ns", "x", nil))
	c := startCache(b, Options{Prefix: prefix})

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ws := make([]*Watcher, n)
	for i := range ws {
		w, err := c.Watch(ctx, prefix, WatchOptions{Bookmarks: true})
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = w
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perWatcher := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)

	var (
		sentAt    atomic.Int64 // unix ns when the current write started
		firstAt   atomic.Int64 // unix ns of the current event's first delivery
		wg        sync.WaitGroup
		encodings atomic.Int64
	)
	lat := make([][]time.Duration, n)
	spread := make([][]time.Duration, n)
	encode := func(e *Event) ([]byte, error) {
		encodings.Add(1)
		return json.Marshal(e.Object.Object)
	}
	var readers sync.WaitGroup
	for i, w := range ws {
		lat[i] = make([]time.Duration, 0, b.N)
		spread[i] = make([]time.Duration, 0, b.N)
		readers.Go(func() {
			for ev := range w.ResultChan() {
				if ev.Type != storage.Modified {
					continue
				}
				now := time.Now().UnixNano()
				firstAt.CompareAndSwap(0, now)
				if _, err := ev.Encoded("json", encode); err != nil {
					b.Error(err)
				}
				lat[i] = append(lat[i], time.Duration(now-sentAt.Load()))
				spread[i] = append(spread[i], time.Duration(now-firstAt.Load()))
				wg.Done()
			}
		})
	}
	b.ResetTimer()
	for i := range b.N {
		wg.Add(n)
		firstAt.Store(0)
		sentAt.Store(time.Now().UnixNano())
		_, err := testStore.GuaranteedUpdate(ctx, k, storage.UpdateOptions{}, func(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			o.Object["data"] = map[string]any{"n": int64(i + 1)}
			return o, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		wg.Wait()
	}
	b.StopTimer()
	for _, w := range ws {
		w.Stop()
	}
	readers.Wait()
	all := slices.Concat(lat...)
	sp := slices.Concat(spread...)
	slices.Sort(all)
	slices.Sort(sp)
	pct := func(d []time.Duration, p float64) float64 { return float64(d[int(float64(len(d)-1)*p)].Nanoseconds()) }
	b.ReportMetric(pct(all, 0.50), "p50-ns")
	b.ReportMetric(pct(all, 0.99), "p99-ns")
	b.ReportMetric(pct(sp, 0.99), "fanout-p99-ns")
	b.ReportMetric(perWatcher, "B/watcher")
	b.ReportMetric(float64(encodings.Load())/float64(b.N), "encodes/event")
}

const (
	list100kResource = "bench-list100k"
	list100kObjects  = 100_000
	list100kNS       = 10
)

var (
	list100kOnce  sync.Once
	list100kCache *Cache
	list100kErr   error
)

// list100kFixture loads 100,000 small objects into etcd (raw transactions of 128 puts, the
// storage encoding) and starts a cache over them, once per process.
func list100kFixture(b *testing.B) *Cache {
	list100kOnce.Do(func() {
		ctx := context.Background()
		prefix := storage.ResourcePrefix("test.kube.dev", list100kResource)
		start := time.Now()
		if n, err := testStore.Count(ctx, prefix); err == nil && n < list100kObjects {
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(4)
			const batch = 128
			for first := 0; first < list100kObjects; first += batch {
				g.Go(func() error {
					ops := make([]clientv3.Op, 0, batch)
					for i := first; i < min(first+batch, list100kObjects); i++ {
						ns, name := fmt.Sprintf("ns%d", i%list100kNS), fmt.Sprintf("obj-%06d", i)
						data, err := json.Marshal(map[string]any{
							"apiVersion": "v1", "kind": "ConfigMap",
							"metadata": map[string]any{"name": name, "namespace": ns, "uid": fmt.Sprintf("uid-%d", i),
								"labels": map[string]any{"app": fmt.Sprintf("app%d", i%100)}},
							"data": map[string]any{"key": "value"},
						})
						if err != nil {
							return err
						}
						ops = append(ops, clientv3.OpPut(key(list100kResource, ns, name), string(data)))
					}
					_, err := testClient.Txn(gctx).Then(ops...).Commit()
					return err
				})
			}
			if list100kErr = g.Wait(); list100kErr != nil {
				return
			}
		}
		loaded := time.Since(start)
		start = time.Now()
		c := New(Options{Store: testStore, Prefix: prefix})
		go c.Start(context.Background())
		if list100kErr = c.WaitReady(ctx); list100kErr != nil {
			return
		}
		list100kCache = c
		fmt.Printf("list100k fixture: etcd load %v, cache fill %v\n", loaded.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	})
	if list100kErr != nil {
		b.Fatal(list100kErr)
	}
	return list100kCache
}

// BenchmarkList100k lists 100,000 small objects from the cache and from etcd through
// storage.Store.
func BenchmarkList100k(b *testing.B) {
	c := list100kFixture(b)
	ctx := context.Background()
	prefix := c.Prefix()
	ns := storage.NamespacePrefix("test.kube.dev", list100kResource, "ns3")
	check := func(b *testing.B, res *storage.ListResult, err error, want int) {
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Items) != want {
			b.Fatalf("%d items, want %d", len(res.Items), want)
		}
	}
	cases := []struct {
		name   string
		prefix string
		limit  int64
		want   int
	}{
		{"all", prefix, 0, list100kObjects},
		{"limit500", prefix, 500, 500},
		{"namespace", ns, 0, list100kObjects / list100kNS},
	}
	for _, tc := range cases {
		b.Run("cache/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.List(ctx, tc.prefix, ListOptions{Limit: tc.limit})
				check(b, res, err, tc.want)
			}
		})
		b.Run("cache-consistent/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.List(ctx, tc.prefix, ListOptions{Limit: tc.limit, Consistent: true})
				check(b, res, err, tc.want)
			}
		})
		b.Run("etcd/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := testStore.List(ctx, tc.prefix, storage.ListOptions{Limit: tc.limit})
				check(b, res, err, tc.want)
			}
		})
	}
}
