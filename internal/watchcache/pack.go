package watchcache

import (
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"kubeos.dev/kube/internal/deflate"
	"kubeos.dev/kube/internal/jsonenc"
	"kubeos.dev/kube/internal/storage"
)

// A packed cache (Options.Pack) keeps each object as deflated JSON instead of decoded: a
// CustomResourceDefinition is ~15 KB decoded and ~1.5 KB packed. Every read decodes
// (List, Get, initial events, ring replays); live events are delivered as storage decoded
// them. The ring shares the tree's packed bytes, so resuming watches cost no extra memory.

// packBufs hold the JSON encoding before compression.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// pack encodes obj as deflated JSON.
func pack(obj *unstructured.Unstructured) ([]byte, error) {
	bp := packBufs.Get().(*[]byte)
	defer packBufs.Put(bp)
	raw, err := jsonenc.AppendValue((*bp)[:0], obj.Object)
	if err != nil {
		return nil, err
	}
	*bp = raw
	return deflate.Compress(raw), nil
}

// unpack decodes what pack encoded, with storage's number rules (integers as int64).
func unpack(data []byte) (*unstructured.Unstructured, error) {
	raw, err := deflate.Decompress(data)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// newEntry makes the tree entry of obj: packed in a packed cache. An object that does not
// encode (not possible for one storage decoded) is kept decoded.
// The entry carries obj's values of fields, the indexed ones when the caller looked (it
// checks again under the cache's lock, in case an index was added meanwhile).
func (c *Cache) newEntry(key string, obj *unstructured.Unstructured, rev int64, fields []string) *entry {
	vals := indexValues(c.o.Attrs, fields, obj)
	if c.o.Pack {
		if b, err := pack(obj); err == nil {
			return &entry{key: key, rev: rev, packed: b, vals: vals}
		}
	}
	return &entry{key: key, rev: rev, obj: obj, vals: vals}
}

// object returns the entry's object, decoding a packed one (a new copy on every call).
func (e *entry) object() (*unstructured.Unstructured, error) {
	if e.obj != nil || e.packed == nil {
		return e.obj, nil
	}
	obj, err := unpack(e.packed)
	if err != nil {
		return nil, &storage.Error{Kind: storage.ErrInvalidObject, Key: e.key, Detail: fmt.Sprintf("watch cache: unpacking: %v", err)}
	}
	return obj, nil
}

// entryEvent builds an event from tree entries (cur: the new state, old: the previous one).
// Decoded entries give the event its objects at once; packed ones are decoded by
// unpackEvent when the event is read.
func entryEvent(t storage.EventType, key string, rev int64, cur, old *entry) *Event {
	ev := &Event{Event: storage.Event{Type: t, Key: key, Revision: rev}, cur: cur, old: old}
	if old != nil {
		ev.PrevObject = old.obj
	}
	switch {
	case t == storage.Deleted:
		ev.Object = ev.PrevObject // the last state; unpackEvent gives it the deletion's revision
	case cur != nil:
		ev.Object = cur.obj
	}
	return ev
}

// packed reports whether ev still has packed states to decode.
func (ev *Event) packed() bool {
	return (ev.cur != nil && ev.cur.obj == nil) || (ev.old != nil && ev.old.obj == nil)
}

// unpackEvent returns ev with its objects decoded (a new event), or ev itself when it has
// nothing packed.
func unpackEvent(ev *Event) (*Event, error) {
	if !ev.packed() {
		return ev, nil
	}
	out := &Event{Event: ev.Event, InitialEventsEnd: ev.InitialEventsEnd}
	var err error
	if ev.old != nil {
		if out.PrevObject, err = ev.old.object(); err != nil {
			return nil, err
		}
	}
	switch {
	case ev.Type == storage.Deleted && out.PrevObject != nil:
		out.Object = out.PrevObject.DeepCopy()
		out.Object.SetResourceVersion(strconv.FormatInt(ev.Revision, 10))
	case ev.cur != nil:
		if out.Object, err = ev.cur.object(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// revOf is obj's revision, 0 when it has none or an invalid one.
func revOf(obj *unstructured.Unstructured) int64 {
	r, _ := storage.Revision(obj)
	return r
}
