package servicealloc

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/rangeallocation"
	"k8s.io/kubernetes/pkg/registry/core/service/allocator"

	"kubeos.dev/kube/internal/storage"
)

// NodePortsKey is the etcd key of the node port bitmap: upstream's key, holding a v1
// RangeAllocation (range and bitmap) in JSON.
const NodePortsKey = storage.Prefix + "ranges/servicenodeports"

// storeTimeout bounds one bitmap read-modify-write (upstream's has no deadline at all).
const storeTimeout = 30 * time.Second

var errUnableToAllocate = errors.New("unable to allocate")

var nodePortResource = schema.GroupResource{Resource: "servicenodeportallocations"}

// rangeStore is a bitmap persisted in one etcd key, as upstream's allocator/storage.Etcd:
// every change is a compare-and-swap of the whole bitmap, so two servers never hand out one
// item, and an item is never handed out without the bitmap recording it first (a crash
// after the write leaks it until the repair loop frees it; it can never cause a duplicate).
// It is the allocator.Interface of upstream's portallocator and the RangeRegistry its repair
// controller reads and rewrites.
type rangeStore struct {
	mu    sync.Mutex
	mem   allocator.Snapshottable
	store *storage.Store
	key   string
}

var (
	_ allocator.Interface           = (*rangeStore)(nil)
	_ rangeallocation.RangeRegistry = (*rangeStore)(nil)
)

func newRangeStore(mem allocator.Snapshottable, store *storage.Store, key string) *rangeStore {
	return &rangeStore{mem: mem, store: store, key: key}
}

// rangeAllocation is the stored object.
func rangeAllocation(rangeSpec string, data []byte, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "RangeAllocation",
		"metadata":   map[string]any{},
		"range":      rangeSpec,
		"data":       base64.StdEncoding.EncodeToString(data),
	}}
	if rv != "" {
		u.SetResourceVersion(rv)
	}
	return u
}

// decodeRange reads range and data from a stored RangeAllocation.
func decodeRange(u *unstructured.Unstructured) (string, []byte, error) {
	rangeSpec, _, _ := unstructured.NestedString(u.Object, "range")
	enc, _, _ := unstructured.NestedString(u.Object, "data")
	data, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", nil, fmt.Errorf("%s: bad bitmap: %w", u.GetName(), err)
	}
	return rangeSpec, data, nil
}

// tryUpdate applies fn to the stored bitmap and writes it back. fn runs on the in-memory
// bitmap restored from what is stored (again on every conflict retry).
func (s *rangeStore) tryUpdate(fn func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_, err := s.store.GuaranteedUpdate(ctx, s.key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		rangeSpec, data, err := decodeRange(cur)
		if err != nil {
			return nil, err
		}
		if err := s.mem.Restore(rangeSpec, data); err != nil {
			return nil, err
		}
		if err := fn(); err != nil {
			return nil, err
		}
		rangeSpec, data = s.mem.Snapshot()
		cur.Object["range"] = rangeSpec
		cur.Object["data"] = base64.StdEncoding.EncodeToString(data)
		return cur, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		// The repair loop writes the first bitmap (from the Services that exist) before
		// anything is allocated, as upstream.
		return fmt.Errorf("cannot allocate resources of type %s at this time", nodePortResource)
	}
	return err
}

func (s *rangeStore) Allocate(offset int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.tryUpdate(func() error {
		ok, err := s.mem.Allocate(offset)
		if err != nil {
			return err
		}
		if !ok {
			return errUnableToAllocate
		}
		return nil
	})
	if errors.Is(err, errUnableToAllocate) {
		return false, nil
	}
	return err == nil, err
}

func (s *rangeStore) AllocateNext() (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var offset int
	err := s.tryUpdate(func() error {
		var ok bool
		var err error
		offset, ok, err = s.mem.AllocateNext()
		if err != nil {
			return err
		}
		if !ok {
			return errUnableToAllocate
		}
		return nil
	})
	if errors.Is(err, errUnableToAllocate) {
		return offset, false, nil
	}
	return offset, err == nil, err
}

func (s *rangeStore) Release(offset int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tryUpdate(func() error { return s.mem.Release(offset) })
}

// ForEach, Has and Free answer from the bitmap as last read or written by this server.
func (s *rangeStore) ForEach(fn func(int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem.ForEach(fn)
}

func (s *rangeStore) Has(offset int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem.Has(offset)
}

func (s *rangeStore) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem.Free()
}

func (s *rangeStore) Destroy() {}

// Get returns the stored bitmap; when none is stored yet, an empty one without a
// resourceVersion (RangeRegistry's contract).
func (s *rangeStore) Get() (*api.RangeAllocation, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	u, err := s.store.Get(ctx, s.key)
	if errors.Is(err, storage.ErrNotFound) {
		return &api.RangeAllocation{}, nil
	}
	if err != nil {
		return nil, err
	}
	rangeSpec, data, err := decodeRange(u)
	if err != nil {
		return nil, err
	}
	ra := &api.RangeAllocation{Range: rangeSpec, Data: data}
	ra.ResourceVersion = u.GetResourceVersion()
	return ra, nil
}

// CreateOrUpdate writes snapshot if the stored bitmap is still the one snapshot was read
// from (its resourceVersion; none: nothing stored yet), else answers a 409 Conflict, which
// the repair loop retries.
func (s *rangeStore) CreateOrUpdate(snapshot *api.RangeAllocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_, err := s.store.GuaranteedUpdate(ctx, s.key, storage.UpdateOptions{AllowCreate: true}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		switch {
		case cur != nil && snapshot.ResourceVersion != "":
			if cur.GetResourceVersion() != snapshot.ResourceVersion {
				return nil, apierrors.NewConflict(nodePortResource, "", errors.New("the provided resource version does not match"))
			}
		case cur != nil:
			return nil, apierrors.NewConflict(nodePortResource, "", errors.New("another caller has already initialized the resource"))
		}
		return rangeAllocation(snapshot.Range, snapshot.Data, ""), nil
	})
	if err != nil {
		return err
	}
	return s.mem.Restore(snapshot.Range, snapshot.Data)
}
