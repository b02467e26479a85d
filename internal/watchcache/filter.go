package watchcache

import (
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
		func() bool { return c.matches(p, c.ev.PrevObject, &c.prev) })
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
			obj := e.PrevObject.DeepCopy()
			obj.SetResourceVersion(strconv.FormatInt(e.Revision, 10))
			e.Object = obj
			c.deleted = &Event{Event: e}
		}
		return c.deleted
	}
	return nil
}
