package servicealloc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/allocator"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// startStore runs an embedded etcd member for one test.
func startStore(t *testing.T) *storage.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Close)
	return storage.New(member.Client())
}

// newPorts is one server's node port allocator over the shared bitmap.
func newPorts(t *testing.T, store *storage.Store, pr utilnet.PortRange) (*portallocator.PortAllocator, *rangeStore) {
	t.Helper()
	var rs *rangeStore
	pa, err := portallocator.New(pr, func(max int, rangeSpec string, offset int) (allocator.Interface, error) {
		rs = newRangeStore(allocator.NewAllocationMapWithOffset(max, rangeSpec, offset), store, NodePortsKey)
		return rs, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pa, rs
}

// Two servers allocating from one stored bitmap at once never hand out a port twice, and
// every port they hand out is recorded in the bitmap.
func TestRangeStoreSharedAcrossServers(t *testing.T) {
	store := startStore(t)
	pr := utilnet.PortRange{Base: 30000, Size: 40}
	a, ra := newPorts(t, store, pr)
	b, _ := newPorts(t, store, pr)

	// Nothing is allocated before the repair loop has written the first bitmap, as upstream.
	if _, err := a.AllocateNext(); err == nil || !strings.Contains(err.Error(), "cannot allocate resources of type servicenodeportallocations at this time") {
		t.Fatalf("allocation before initialisation: %v", err)
	}
	snap, err := ra.Get()
	if err != nil || snap.ResourceVersion != "" {
		t.Fatalf("Get before initialisation: %+v, %v", snap, err)
	}
	empty, _ := portallocator.NewInMemory(pr)
	if err := empty.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := ra.CreateOrUpdate(snap); err != nil {
		t.Fatal(err)
	}
	// A second initialisation from the same (stale) snapshot is a conflict.
	if err := ra.CreateOrUpdate(snap); err == nil || !strings.Contains(err.Error(), "another caller has already initialized the resource") {
		t.Fatalf("second initialisation: %v", err)
	}

	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i, pa := range []*portallocator.PortAllocator{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p, err := pa.AllocateNext()
				if errors.Is(err, portallocator.ErrFull) {
					return
				}
				if err != nil {
					t.Error(i, err)
					return
				}
				mu.Lock()
				got[p]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != pr.Size {
		t.Fatalf("%d ports handed out, want %d", len(got), pr.Size)
	}
	for p, n := range got {
		if n != 1 || !pr.Contains(p) {
			t.Errorf("port %d handed out %d times (range %s)", p, n, pr.String())
		}
	}
	// The stored bitmap, read afresh, holds every one of them.
	stored, err := ra.Get()
	if err != nil {
		t.Fatal(err)
	}
	fromStore, err := portallocator.NewFromSnapshot(stored)
	if err != nil {
		t.Fatal(err)
	}
	if fromStore.Used() != pr.Size {
		t.Fatalf("stored bitmap holds %d ports, want %d", fromStore.Used(), pr.Size)
	}

	// A port released on one server can be taken, once, on the other; a chosen port in use
	// is refused with upstream's error.
	if err := a.Release(30007); err != nil {
		t.Fatal(err)
	}
	if err := b.Allocate(30007); err != nil {
		t.Fatalf("allocate a released port on the other server: %v", err)
	}
	if err := a.Allocate(30007); !errors.Is(err, portallocator.ErrAllocated) {
		t.Fatalf("allocate a port in use: %v", err)
	}
	var notInRange *portallocator.ErrNotInRange
	if err := a.Allocate(29999); !errors.As(err, &notInRange) {
		t.Fatalf("allocate out of range: %v", err)
	}
}

// The repair controller's view (RangeRegistry): a snapshot written over a newer bitmap is a
// conflict, so a repair pass never erases an allocation made after it read the bitmap.
func TestRangeStoreRepairConflict(t *testing.T) {
	store := startStore(t)
	pr := utilnet.PortRange{Base: 31000, Size: 10}
	a, ra := newPorts(t, store, pr)
	snap := &api.RangeAllocation{}
	empty, _ := portallocator.NewInMemory(pr)
	if err := empty.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := ra.CreateOrUpdate(snap); err != nil {
		t.Fatal(err)
	}
	read, err := ra.Get()
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.AllocateNext()
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.CreateOrUpdate(read); err == nil || !strings.Contains(err.Error(), "the provided resource version does not match") {
		t.Fatalf("stale repair write: %v", err)
	}
	read, _ = ra.Get()
	after, _ := portallocator.NewFromSnapshot(read)
	if !after.Has(p) {
		t.Fatalf("port %d lost from the bitmap", p)
	}
}
