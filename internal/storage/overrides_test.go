package storage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// A store with an override keeps that resource's objects in the override's cluster, and
// only there, for every operation; the other resources stay in the main cluster.
func TestOverrides(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	other := member.Client()
	defer other.Close()

	resource := fmt.Sprintf("events-%d", time.Now().UnixNano())
	main := storage.New(client)
	s := main.WithOverrides(
		storage.Override{Group: "", Resource: resource, Client: other},
		storage.Override{Group: "apps", Resource: resource, Client: other},
		storage.Override{Group: "kept", Resource: resource, Client: client}, // the main client: no route
	)
	if got := s.Clusters(); len(got) != 2 || got[0] != s || got[1] != s.For(storage.ResourcePrefix("apps", resource)) {
		t.Fatalf("Clusters: %v", got)
	}
	if s.For(storage.ResourcePrefix("", resource)) == s || s.For(storage.ResourcePrefix("kept", resource)) != s ||
		s.For(storage.Prefix) != s || s.For(storage.ResourcePrefix("", resource+"x")) != s {
		t.Fatal("For routes the wrong prefixes")
	}

	key := storage.Key("", resource, "ns1", "a")
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "a", "namespace": "ns1"}}}
	created, err := s.Create(ctx, key, obj)
	if err != nil {
		t.Fatal(err)
	}
	inOther := func(key string) bool {
		t.Helper()
		resp, err := other.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		mresp, err := client.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) > 0 && len(mresp.Kvs) > 0 {
			t.Fatalf("%s is in both clusters", key)
		}
		return len(resp.Kvs) > 0
	}
	if !inOther(key) {
		t.Fatal("the created object is not in the override's cluster")
	}
	otherRev, err := s.For(key).CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev, _ := storage.Revision(created); rev != otherRev {
		t.Fatalf("resourceVersion %d, want the override cluster's revision %d", rev, otherRev)
	}

	w, err := s.Watch(ctx, storage.ResourcePrefix("", resource), storage.WatchOptions{Revision: otherRev})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := s.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	updated, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.SetLabels(map[string]string{"x": "y"})
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != storage.Modified || ev.Object.GetResourceVersion() != updated.GetResourceVersion() {
			t.Fatalf("watch: %v %v", ev.Type, ev.Err)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	res, err := s.List(ctx, storage.NamespacePrefix("", resource, "ns1"), storage.ListOptions{})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("list: %v %v", res, err)
	}
	if n, err := s.Count(ctx, storage.ResourcePrefix("", resource)); err != nil || n != 1 {
		t.Fatalf("count: %d %v", n, err)
	}
	if _, err := s.Delete(ctx, key, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if inOther(key) {
		t.Fatal("deleted object still stored")
	}

	// Other resources stay in the main cluster.
	keptKey := storage.Key("kept", resource, "", "b")
	if _, err := s.Create(ctx, keptKey, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kept/v1", "kind": "K", "metadata": map[string]any{"name": "b"}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Get(ctx, keptKey, clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("the other resource is not in the main cluster: %v %v", resp, err)
	}
	if _, err := s.Delete(ctx, keptKey, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
