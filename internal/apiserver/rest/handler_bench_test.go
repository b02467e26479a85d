package rest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientscheme "k8s.io/client-go/kubernetes/scheme"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

// BenchmarkConfigMap measures one configmap create, get (consistent, by name) and update
// (PUT without resourceVersion) through the REST handler and the filter chain (request info,
// metrics, authentication, RBAC as system:masters, in-flight limits), in-process with no
// network, with client-go's typed-client wire format (protobuf bodies, Accept protobuf then
// JSON); and beside each, the same operation on the bare storage.Store ("store"), so that
// api/store is the API path's own cost. etcd runs in-process without fsync: what is left is
// CPU. cpu-ns/op is the process's CPU time (user+system, every goroutine: etcd included) per
// operation, the figure to compare; the operations run from 8 goroutines as apibench does.
func BenchmarkConfigMap(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: b.TempDir(), UnsafeNoFsync: true,
		HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	cli, err := etcd.NewClient(etcd.ClientOptions{Endpoints: m.ClientURLs()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	store := storage.New(cli)
	reg := registry.New()
	for _, k := range registry.Builtins() {
		reg.Add(k)
	}
	caches := watchcache.NewSet(ctx, watchcache.Options{Store: store})
	h := rest.New(rest.Options{Registry: reg, Store: store, Caches: caches, GarbageCollector: true})
	authz := rbac.NewAuthorizer()
	authz.SetSnapshot(rbac.Build(nil, rbac.BootstrapClusterRoles(), nil, rbac.BootstrapClusterRoleBindings()))
	chain := filters.Chain(h, filters.Options{
		Authenticators: []filters.Authenticator{admin{}},
		Authorizer:     authz,
		Metrics:        filters.NewMetrics(prometheus.NewRegistry()),
	})
	// The server always runs the configmaps' watch cache (its controllers watch them): it
	// decodes every write in both the api and the store runs.
	if err := caches.Get(storage.ResourcePrefix("", "configmaps"), nil).WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	const ns = "bench"
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "uid": "0", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": map[string]any{"phase": "Active"}}}
	if _, err := store.Create(ctx, storage.Key("", "namespaces", "", ns), nsObj); err != nil {
		b.Fatal(err)
	}

	serve := func(b *testing.B, method, path string, body []byte, want int) {
		r := httptest.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
		r.Header.Set("Accept", "application/vnd.kubernetes.protobuf, application/json")
		if body != nil {
			r.Header.Set("Content-Type", "application/vnd.kubernetes.protobuf")
		}
		w := httptest.NewRecorder()
		// A goroutine of its own per request, as net/http's HTTP/2 server runs each stream:
		// its stack starts small and grows with the request.
		done := make(chan struct{})
		go func() {
			defer close(done)
			chain.ServeHTTP(w, r)
		}()
		<-done
		if w.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
	}
	var seq atomic.Int64
	const updated = 1000 // objects the get and update phases address
	name := func(i int64) string { return fmt.Sprintf("cm-%06d", i) }
	for i := range int64(updated) {
		serve(b, http.MethodPost, "/api/v1/namespaces/"+ns+"/configmaps", cmBody(name(i), ""), http.StatusCreated)
	}
	seq.Store(updated)
	base := "/api/v1/namespaces/" + ns + "/configmaps"

	b.Run("create/api", func(b *testing.B) {
		cpuParallel(b, func() {
			serve(b, http.MethodPost, base, cmBody(name(seq.Add(1)), ""), http.StatusCreated)
		})
	})
	b.Run("create/store", func(b *testing.B) {
		cpuParallel(b, func() {
			n := name(seq.Add(1))
			if _, err := store.Create(ctx, storage.Key("", "configmaps", ns, n), storeObject(ns, n, "")); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("get/api", func(b *testing.B) {
		var i atomic.Int64
		cpuParallel(b, func() {
			serve(b, http.MethodGet, base+"/"+name(i.Add(1)%updated), nil, http.StatusOK)
		})
	})
	b.Run("get/store", func(b *testing.B) {
		var i atomic.Int64
		cpuParallel(b, func() {
			if _, err := store.Get(ctx, storage.Key("", "configmaps", ns, name(i.Add(1)%updated))); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("update/api", func(b *testing.B) {
		var i atomic.Int64
		cpuParallel(b, func() {
			n := i.Add(1)
			serve(b, http.MethodPut, base+"/"+name(n%updated), cmBody(name(n%updated), strconv.FormatInt(n, 10)), http.StatusOK)
		})
	})
	b.Run("update/store", func(b *testing.B) {
		var i atomic.Int64
		cpuParallel(b, func() {
			n := i.Add(1)
			key := storage.Key("", "configmaps", ns, name(n%updated))
			_, err := store.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				cur.Object["data"] = map[string]any{"key": "value", "n": name(n % updated), "i": strconv.FormatInt(n, 10)}
				return cur, nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}

// admin authenticates every request as a member of system:masters.
type admin struct{}

func (admin) Authenticate(*http.Request) (*request.User, bool, error) {
	return &request.User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}, true, nil
}

var protoCodec = protobuf.NewSerializer(clientscheme.Scheme, clientscheme.Scheme)

// cmBody is what client-go's typed client sends for a configmap: protobuf in its envelope.
func cmBody(name, i string) []byte {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"key": "value", "n": name},
	}
	if i != "" {
		cm.Data["i"] = i
	}
	var buf bytes.Buffer
	if err := protoCodec.Encode(cm, &buf); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// storeObject is the configmap the API would store for cmBody.
func storeObject(ns, name, i string) *unstructured.Unstructured {
	data := map[string]any{"key": "value", "n": name}
	if i != "" {
		data["i"] = i
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": "bench"},
			"uid": "00000000-0000-0000-0000-000000000000", "creationTimestamp": "2026-01-01T00:00:00Z"},
		"data": data,
	}}
}

// cpuParallel runs op b.N times from 8 goroutines and reports the process CPU time per op.
func cpuParallel(b *testing.B, op func()) {
	b.ReportAllocs()
	b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
	before := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
