package watchcache

import (
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"kubeos.dev/kube/internal/storage"
)

// variant is how one watcher sees one change (storage.FilterEvent's decision).
type variant uint8

const (
	drop      variant = iota // not delivered
	asIs                     // delivered unchanged
	asAdded                  // a modification that made the object match: ADDED
	asDeleted                // a modification that made it stop matching: DELETED with the previous state
)

// decide is storage.FilterEvent's rule: cur and prev say whether the new and the previous
// state match the watcher's predicate. They are functions so that an unneeded match is not
// computed.
func decide(t storage.EventType, cur, prev func() bool) variant {
	switch t {
	case storage.Bookmark, storage.ErrorEvent:
		return asIs
	case storage.Added:
		if cur() {
			return asIs
		}
		return drop
	case storage.Deleted:
		if prev() {
			return asIs
		}
		return drop
	}
	c, p := cur(), prev()
	switch {
	case c && p:
		return asIs
	case c:
		return asAdded
	case p:
		return asDeleted
	}
	return drop
}

// attrs memoises an object's selectable labels and fields.
type attrs struct {
	done bool
	l    labels.Set
	f    fields.Set
}

// change is one event being offered to watchers: it computes each object's attributes once,
// and each variant's Event once, however many watchers see it.
type change struct {
	ev             *Event
	attrFunc       storage.AttrFunc
	obj, prev      attrs
	added, deleted *Event
	// prevObj is the previous state, decoded on first use when the event does not carry
	// it (a packed cache's live event from a LazyPrev watch).
	prevObj  *unstructured.Unstructured
	prevDone bool
	// idxFields and prevIdx are the cache's indexed fields and the previous state's values
	// of them: they answer a predicate on those fields alone (a node's pod watcher) without
	// decoding the previous state.
	idxFields, prevIdx []string
}

// withPrevIndex gives c the previous state's indexed values (vals[i] of fields[i]).
func (c *change) withPrevIndex(fields, vals []string) *change {
	if len(fields) > 0 && len(vals) == len(fields) {
		c.idxFields, c.prevIdx = fields, vals
	}
	return c
}

// matchesPrev says whether the previous state matches p: from the index values when p
// selects on indexed fields (and the name or namespace, which a key's states share) only
// and the previous state is not decoded, else from the state itself.
func (c *change) matchesPrev(p storage.Predicate) bool {
	// (A predicate's Attrs extract the indexed fields as the cache's do: Options.IndexFields.)
	if c.ev.PrevObject == nil && !c.prevDone && c.prevIdx != nil &&
		(p.Label == nil || p.Label.Empty()) && p.Field != nil && !p.Field.Empty() {
		if ok, decided := c.matchIndexed(p.Field); decided {
			return ok
		}
	}
	return c.matches(p, c.previous(), &c.prev)
}

func (c *change) matchIndexed(sel fields.Selector) (match, decided bool) {
	set := fields.Set{}
	for _, r := range sel.Requirements() {
		if i := slices.Index(c.idxFields, r.Field); i >= 0 {
			set[r.Field] = c.prevIdx[i]
			continue
		}
		// The same key: the previous state's name and namespace are the new state's.
		switch {
		case c.ev.Object == nil:
			return false, false
		case r.Field == "metadata.name":
			set[r.Field] = c.ev.Object.GetName()
		case r.Field == "metadata.namespace":
			set[r.Field] = c.ev.Object.GetNamespace()
		default:
			return false, false
		}
	}
	return sel.Matches(set), true
}

// previous returns the event's previous state, decoding it once if needed.
func (c *change) previous() *unstructured.Unstructured {
	if !c.prevDone {
		c.prevDone = true
		c.prevObj = c.ev.PrevObject
		if c.prevObj == nil {
			c.prevObj, _ = c.ev.Event.Prev()
		}
	}
	return c.prevObj
}

func newChange(ev *Event, attrFunc storage.AttrFunc) *change {
	return &change{ev: ev, attrFunc: attrFunc}
}

func (c *change) matches(p storage.Predicate, obj *unstructured.Unstructured, a *attrs) bool {
	if obj == nil {
		return false
	}
	if p.Empty() {
		return true
	}
	if p.Attrs != nil {
		return p.Matches(obj)
	}
	if !a.done {
		a.l, a.f = c.attrFunc(obj)
		a.done = true
	}
	if p.Label != nil && !p.Label.Empty() && !p.Label.Matches(a.l) {
		return false
	}
	if p.Field != nil && !p.Field.Empty() && !p.Field.Matches(a.f) {
		return false
	}
	return true
}

// forPredicate returns the event a watcher with predicate p receives, or nil.
func (c *change) forPredicate(p storage.Predicate) *Event {
	if p.Empty() {
		return c.ev
	}
	v := decide(c.ev.Type,
		func() bool { return c.matches(p, c.ev.Object, &c.obj) },
		func() bool { return c.matchesPrev(p) })
	return c.event(v)
}

func (c *change) event(v variant) *Event {
	switch v {
	case asIs:
		return c.ev
	case asAdded:
		if c.added == nil {
			e := c.ev.Event
			e.Type = storage.Added
			c.added = &Event{Event: e}
		}
		return c.added
	case asDeleted:
		if c.deleted == nil {
			e := c.ev.Event
			e.Type = storage.Deleted
			if e.PrevObject = c.previous(); e.PrevObject == nil {
				return nil // the stored previous state does not decode: nothing to send
			}
			obj := e.PrevObject.DeepCopy()
			obj.SetResourceVersion(strconv.FormatInt(e.Revision, 10))
			e.Object = obj
			c.deleted = &Event{Event: e}
		}
		return c.deleted
	}
	return nil
}
