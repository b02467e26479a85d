package watchcache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// A set over a store with an override (--etcd-servers-overrides) feeds the overridden
// resource's cache from the override's cluster, from that cluster's revisions: a late cache
// replays its history, and a consistent watch fences on that cluster's revision (the main
// cluster's, far ahead, would time out).
func TestSetOverrides(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	mctx, mcancel := context.WithTimeout(ctx, time.Minute)
	defer mcancel()
	member, err := etcd.StartMember(mctx, etcd.MemberOptions{DataDir: t.TempDir(), ProgressNotifyInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	other := member.Client()
	defer other.Close()

	res, prefix := testResource(t)
	mainRes, mainPrefix := testResource(t)
	// The main cluster's revision runs well ahead of the new one's.
	for i := range 20 {
		name := fmt.Sprintf("f%d", i)
		create(t, key(mainRes, "", name), newObj("", name, nil))
	}
	routed := testStore.WithOverrides(storage.Override{Group: "test.kube.dev", Resource: res, Client: other})
	s := NewSet(ctx, Options{Store: routed, WaitTimeout: 2 * time.Second})

	out, err := routed.Create(ctx, key(res, "", "x"), newObj("", "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	created, _ := storage.Revision(out)
	if _, err := routed.Delete(ctx, key(res, "", "x"), storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mainRev, err := testStore.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if created >= mainRev {
		t.Fatalf("the override's revision %d is not behind the main cluster's %d: the test proves nothing", created, mainRev)
	}

	c := s.Get(prefix, nil)
	w, err := c.Watch(ctx, prefix, WatchOptions{Revision: created})
	if err != nil {
		t.Fatalf("watch from the create's revision: %v", err)
	}
	defer w.Stop()
	if ev := nextNonBookmark(t, w); ev.Type != storage.Deleted || ev.Object.GetName() != "x" {
		t.Fatalf("first event %v %v, want DELETED x", ev.Type, ev.Object)
	}

	out, err = routed.Create(ctx, key(res, "", "y"), newObj("", "y", nil))
	if err != nil {
		t.Fatal(err)
	}
	yRev, _ := storage.Revision(out)
	if ev := nextNonBookmark(t, w); ev.Type != storage.Added || ev.Revision != yRev {
		t.Fatalf("event %v at %d, want ADDED at %d", ev.Type, ev.Revision, yRev)
	}
	iw, err := c.Watch(ctx, prefix, WatchOptions{SendInitialEvents: true, Consistent: true})
	if err != nil {
		t.Fatalf("consistent watch: %v", err)
	}
	defer iw.Stop()
	if ev := nextNonBookmark(t, iw); ev.Type != storage.Added || ev.Object.GetName() != "y" {
		t.Fatalf("initial event %v %v, want ADDED y", ev.Type, ev.Object)
	}
	if ev := nextNonBookmark(t, iw); !ev.InitialEventsEnd || ev.Revision != yRev {
		t.Fatalf("initial events end at %d (%v), want %d", ev.Revision, ev.Type, yRev)
	}

	// The other resources stay in the main cluster, their caches fed from it.
	got, err := s.Get(mainPrefix, nil).List(ctx, mainPrefix, ListOptions{Consistent: true})
	if err != nil || len(got.Items) != 20 || got.Revision < mainRev {
		t.Fatalf("main resource: %d items at %d (%v), want 20 at ≥ %d", len(got.Items), got.Revision, err, mainRev)
	}
	if resp, err := testClient.Get(ctx, key(res, "", "y")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the overridden object is in the main cluster: %v %v", resp, err)
	}
}
