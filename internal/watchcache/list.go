package watchcache

import (
	"context"
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// ListOptions select what List returns.
type ListOptions struct {
	// Revision > 0: the list is not older than Revision (the cache waits until it has reached
	// it, at most Options.WaitTimeout, then fails with an error wrapping
	// storage.ErrFutureRevision). 0: whatever the cache holds, unless Consistent.
	Revision int64
	// Consistent (with Revision 0) makes the list at least as new as storage's current
	// revision. If the cache cannot catch up within WaitTimeout the list is read from
	// storage instead.
	Consistent bool
	// Limit is the largest number of items; 0 means all.
	Limit int64
	// Continue is a token from a previous page; it fixes the snapshot.
	Continue string
	// Predicate filters the items. Without Attrs, the cache's Options.Attrs apply.
	Predicate storage.Predicate
}

// List returns the objects under prefix (the resource's prefix or a narrower one), sorted by
// key. The objects are shared with the cache: READ-ONLY.
//
// A continue token whose snapshot the cache no longer holds, or whose revision etcd has
// compacted (storage.Store.CompactRevision), is served by storage at the token's exact
// revision, which fails with an error wrapping storage.ErrCompacted once etcd has compacted
// that revision.
func (c *Cache) List(ctx context.Context, prefix string, o ListOptions) (*storage.ListResult, error) {
	prefix, err := c.checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	if o.Predicate.Attrs == nil {
		o.Predicate.Attrs = c.o.Attrs
	}
	var snap *tree
	var sk snapKey
	start := prefix
	if o.Continue != "" {
		if start, sk.rev, err = storage.DecodeContinue(o.Continue, prefix); err != nil {
			return nil, err
		}
		if i, v, ok := exactIndex(c.indexFields(), o.Predicate); ok {
			sk.field, sk.value = c.indexFields()[i], v
			snap = c.snapshot(sk)
		}
		if snap == nil {
			// The whole tree at that revision serves any predicate.
			sk.field, sk.value = "", ""
			snap = c.snapshot(sk)
		}
		if cr, ok := c.o.Store.(compactRevisioner); ok && snap != nil && sk.rev < cr.CompactRevision() {
			// etcd no longer has that revision: the token expires as kube-apiserver's does
			// (storage answers ErrCompacted with an inconsistent continue token).
			snap = nil
		}
		if snap == nil {
			return c.o.Store.List(ctx, prefix, storage.ListOptions{Limit: o.Limit, Continue: o.Continue, Predicate: o.Predicate})
		}
	} else {
		switch {
		case o.Revision > 0:
			err = c.waitFor(ctx, o.Revision, false)
		case o.Consistent:
			_, err = c.fence(ctx)
			if errors.Is(err, storage.ErrFutureRevision) {
				// The cache lags: a consistent read from etcd is always correct.
				return c.o.Store.List(ctx, prefix, storage.ListOptions{Limit: o.Limit, Predicate: o.Predicate})
			}
		}
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		var ok bool
		if snap, sk, ok = c.indexedSnapshotLocked(o.Predicate); !ok {
			snap = c.tree.Clone()
		}
		sk.rev = c.rev
		c.mu.Unlock()
	}
	return c.listSnapshot(snap, sk, prefix, start, o)
}

// listSnapshot reads one page of snap (the snapshot sk names) from start.
func (c *Cache) listSnapshot(snap *tree, sk snapKey, prefix, start string, o ListOptions) (*storage.ListResult, error) {
	rev := sk.rev
	res := &storage.ListResult{Revision: rev}
	if (prefix == c.prefix && o.Predicate.Empty()) || sk.field != "" {
		// Every item, or (one value's index tree) at most every item, is in the list.
		n := int64(snap.Len())
		if o.Limit > 0 && o.Limit < n {
			n = o.Limit
		}
		res.Items = make([]*unstructured.Unstructured, 0, n)
	}
	var last string
	more := false
	var err error
	snap.AscendGreaterOrEqual(&entry{key: start}, func(e *entry) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		if o.Limit > 0 && int64(len(res.Items)) == o.Limit {
			more = true
			return false
		}
		var obj *unstructured.Unstructured
		if obj, err = e.object(); err != nil {
			return false
		}
		if o.Predicate.Matches(obj) {
			res.Items = append(res.Items, obj)
			last = e.key
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !more {
		return res, nil
	}
	next := last + "\x00"
	res.Continue = storage.EncodeContinue(rev, next, prefix)
	c.keepSnapshot(sk, snap)
	if o.Predicate.Empty() {
		var n int64
		snap.AscendGreaterOrEqual(&entry{key: next}, func(e *entry) bool {
			if !strings.HasPrefix(e.key, prefix) {
				return false
			}
			n++
			return true
		})
		res.RemainingItemCount = &n
	}
	return res, nil
}

// Get returns the object at key from memory, once the cache has reached minRevision (0: at
// once). It fails with an error wrapping storage.ErrNotFound when the key is absent. The
// object is shared with the cache: READ-ONLY (a packed cache returns a new copy).
func (c *Cache) Get(ctx context.Context, key string, minRevision int64) (*unstructured.Unstructured, error) {
	if !strings.HasPrefix(key, c.prefix) {
		return nil, &storage.Error{Kind: storage.ErrNotFound, Key: key, Detail: "outside the cache's prefix " + c.prefix}
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	if minRevision > 0 {
		if err := c.waitFor(ctx, minRevision, false); err != nil {
			return nil, err
		}
	}
	c.mu.RLock()
	e, ok := c.tree.Get(&entry{key: key})
	c.mu.RUnlock()
	if !ok {
		return nil, &storage.Error{Kind: storage.ErrNotFound, Key: key}
	}
	return e.object()
}

func (c *Cache) snapshot(sk snapKey) *tree {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.snaps[sk]
}

// keepSnapshot remembers snap for the continue tokens of the snapshot sk names; the oldest
// of maxSnapshots goes.
func (c *Cache) keepSnapshot(sk snapKey, snap *tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.snaps[sk]; ok {
		return
	}
	if len(c.snapOrder) == maxSnapshots {
		delete(c.snaps, c.snapOrder[0])
		c.snapOrder = append(c.snapOrder[:0], c.snapOrder[1:]...)
	}
	c.snaps[sk] = snap
	c.snapOrder = append(c.snapOrder, sk)
}
