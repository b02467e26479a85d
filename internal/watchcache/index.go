package watchcache

import (
	"slices"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// An index (Options.IndexFields) serves the callers that select by one value of a field,
// such as the node agents that each watch `spec.nodeName=<their node>`: with 5,000 nodes,
// each agent's list costs what its own pods cost and each change reaches the two or three
// watchers of its old and new node, not all 5,000, as kube-apiserver's cacher does with its
// spec.nodeName indexer and trigger function.
//
// Per indexed field, the cache keeps a B-tree of entries per value (sharing the entries of
// the main tree, so an index costs pointers, not objects) and a list of watchers per value.
// Each entry records its values of the indexed fields (entry.vals, in the order of
// Cache.indexes), so that the previous state's values are known without decoding it again.
// Index trees are updated in the same critical section as the main tree: a snapshot of one
// is consistent with the cache's revision, and paged lists and initial events read a Clone
// of it exactly as they read the main tree.
//
// Indexes may be added to a running cache (Set.Get with fields the cache lacks): the entries
// are then re-made with their new values, once, under the cache's lock.

// index is one indexed field.
type index struct {
	field    string
	entries  map[string]*tree        // value → the entries whose object has it
	watchers map[string]*watcherList // value → the watchers whose selector requires it
}

func newIndex(field string) *index {
	return &index{field: field, entries: map[string]*tree{}, watchers: map[string]*watcherList{}}
}

// indexValues returns obj's values of fields, as attrs gives them ("" for a field obj lacks,
// which is also what a field selector compares with); nil when no field is indexed.
func indexValues(attrs storage.AttrFunc, fields []string, obj *unstructured.Unstructured) []string {
	if len(fields) == 0 || obj == nil {
		return nil
	}
	_, f := attrs(obj)
	out := make([]string, len(fields))
	for i, name := range fields {
		out[i] = f[name]
	}
	return out
}

// exactIndex returns the first of fields that p's field selector requires to equal one value,
// with that value. Objects whose value differs cannot match p, whatever else p requires.
func exactIndex(fields []string, p storage.Predicate) (i int, value string, ok bool) {
	if p.Field == nil || p.Field.Empty() {
		return -1, "", false
	}
	for i, f := range fields {
		if v, found := p.Field.RequiresExactMatch(f); found {
			return i, v, true
		}
	}
	return -1, "", false
}

// indexFields is the names of the indexed fields, read without the lock (entries made
// outside it are checked again under it).
func (c *Cache) indexFields() []string {
	if p := c.fields.Load(); p != nil {
		return *p
	}
	return nil
}

// hasIndexes reports whether every one of fields is indexed. Nothing is allocated.
func (c *Cache) hasIndexes(fields []string) bool {
	have := c.indexFields()
	for _, f := range fields {
		if !slices.Contains(have, f) {
			return false
		}
	}
	return true
}

// newIndexTree is an empty tree of one value, sharing the cache's node free list.
func (c *Cache) newIndexTree() *tree { return btree.NewWithFreeListG(32, lessEntry, c.freelist) }

// indexInsertLocked adds e to the index trees of its values.
func (c *Cache) indexInsertLocked(e *entry) {
	for i, ix := range c.indexes {
		t := ix.entries[e.vals[i]]
		if t == nil {
			t = c.newIndexTree()
			ix.entries[e.vals[i]] = t
		}
		t.ReplaceOrInsert(e)
	}
}

// indexUpdateLocked moves the key of old (nil: none) to cur (nil: deleted) in every index.
func (c *Cache) indexUpdateLocked(old, cur *entry) {
	for i, ix := range c.indexes {
		if old != nil && (cur == nil || old.vals[i] != cur.vals[i]) {
			if t := ix.entries[old.vals[i]]; t != nil {
				t.Delete(old)
				if t.Len() == 0 {
					delete(ix.entries, old.vals[i])
				}
			}
		}
		if cur != nil {
			t := ix.entries[cur.vals[i]]
			if t == nil {
				t = c.newIndexTree()
				ix.entries[cur.vals[i]] = t
			}
			t.ReplaceOrInsert(cur)
		}
	}
}

// valuesLocked makes sure e carries the values of every indexed field, re-making it when an
// index was added after e was made (entries in a tree are never changed).
func (c *Cache) valuesLocked(e *entry, obj *unstructured.Unstructured) (*entry, error) {
	if len(e.vals) == len(c.indexes) {
		return e, nil
	}
	if obj == nil {
		var err error
		if obj, err = e.object(); err != nil {
			return e, err
		}
	}
	n := *e
	n.vals = indexValues(c.o.Attrs, c.indexFields(), obj)
	return &n, nil
}

func (c *Cache) indexFieldsLocked() []string {
	out := make([]string, len(c.indexes))
	for i, ix := range c.indexes {
		out[i] = ix.field
	}
	return out
}

// reindexLocked rebuilds every index from the tree, re-making the entries that lack a value.
// An entry whose object cannot be read (a packed one that does not decode, not possible for
// what the cache packed itself) is indexed under "" for the fields it lacks.
func (c *Cache) reindexLocked() {
	for _, ix := range c.indexes {
		clear(ix.entries)
	}
	if len(c.indexes) == 0 {
		return
	}
	var stale []*entry
	c.tree.Ascend(func(e *entry) bool {
		if len(e.vals) != len(c.indexes) {
			stale = append(stale, e)
		}
		return true
	})
	for _, e := range stale {
		n, err := c.valuesLocked(e, nil)
		if err != nil {
			m := *e
			m.vals = append(slices.Clone(e.vals), make([]string, len(c.indexes)-len(e.vals))...)
			n = &m
		}
		c.tree.ReplaceOrInsert(n)
	}
	c.tree.Ascend(func(e *entry) bool {
		c.indexInsertLocked(e)
		return true
	})
}

// ensureIndexes adds the fields the cache does not index yet. On a loaded cache the indexes
// are built at once, under the lock (once per field for the life of the cache).
func (c *Cache) ensureIndexes(fields []string) {
	if c.hasIndexes(fields) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	added := false
	for _, f := range fields {
		if !slices.ContainsFunc(c.indexes, func(ix *index) bool { return ix.field == f }) {
			c.indexes = append(c.indexes, newIndex(f))
			added = true
		}
	}
	if !added {
		return
	}
	names := c.indexFieldsLocked()
	c.fields.Store(&names)
	if c.loaded {
		c.reindexLocked()
	}
}

// indexedSnapshotLocked returns a snapshot of the entries p can match, when p selects one
// value of an indexed field: the index tree of that value (empty if none has it). ok is false
// when the whole tree must be read.
func (c *Cache) indexedSnapshotLocked(p storage.Predicate) (snap *tree, sk snapKey, ok bool) {
	i, v, ok := exactIndex(c.indexFields(), p)
	if !ok {
		return nil, snapKey{}, false
	}
	sk = snapKey{field: c.indexes[i].field, value: v}
	if t := c.indexes[i].entries[v]; t != nil {
		return t.Clone(), sk, true
	}
	return c.newIndexTree(), sk, true
}

// snapKey names a paged-list snapshot: the main tree at rev (field ""), or one value's index
// tree at rev.
type snapKey struct {
	rev          int64
	field, value string
}
