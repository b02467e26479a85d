package storage

import (
	"context"
	"errors"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// EventType names what happened to an object.
type EventType string

// Event types, spelled as on the Kubernetes watch wire.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Bookmark carries only a revision: every change up to it has been delivered.
	Bookmark EventType = "BOOKMARK"
	// ErrorEvent ends a watch; Err says why (ErrCompacted when it started too far back).
	ErrorEvent EventType = "ERROR"
)

// Event is one change seen by a watch.
type Event struct {
	Type EventType
	// Key of the object.
	Key string
	// Object is the new state; for Deleted, the last state with the deletion's revision.
	Object *unstructured.Unstructured
	// PrevObject is the state before the change (nil for Added). A watch opened with
	// LazyPrev leaves it nil on Modified events: Prev decodes it.
	PrevObject *unstructured.Unstructured
	// PrevRevision is the previous state's modification revision (0 for Added).
	PrevRevision int64
	// Revision at which the change happened.
	Revision int64
	// Err is set on Error events.
	Err error
	// prev decodes the previous state of a LazyPrev watch's Modified event.
	prev func() (*unstructured.Unstructured, error)
}

// Settled returns ev without the means to decode its previous state lazily (which holds
// the stored bytes): for an event kept long after PrevObject was set or found unneeded.
func (ev Event) Settled() Event {
	ev.prev = nil
	return ev
}

// Prev is the state before the change: PrevObject, or, for a LazyPrev watch's Modified
// event, the previous state decoded now (a new copy on every call).
func (ev *Event) Prev() (*unstructured.Unstructured, error) {
	if ev.PrevObject != nil || ev.prev == nil {
		return ev.PrevObject, nil
	}
	return ev.prev()
}

// WatchOptions select what a watch delivers.
type WatchOptions struct {
	// Revision: deliver changes after this revision; 0 starts at the current revision.
	Revision int64
	// ProgressNotify asks for Bookmark events when etcd reports progress.
	ProgressNotify bool
	// Predicate filters events as kube-apiserver does: an object that stops matching is
	// delivered as Deleted, one that starts matching as Added.
	Predicate Predicate
	// LazyPrev leaves the previous state of Modified events undecoded (Event.Prev decodes
	// it), for a consumer that keeps the previous state itself, as a watch cache does.
	// Ignored with a Predicate, which reads the previous state of every event.
	LazyPrev bool
}

// Watcher delivers events until it is stopped or fails.
type Watcher interface {
	// ResultChan delivers events; it is closed when the watch ends.
	ResultChan() <-chan Event
	// Stop ends the watch and releases its resources.
	Stop()
}

type etcdWatcher struct {
	cancel context.CancelFunc
	out    chan Event
}

func (w *etcdWatcher) ResultChan() <-chan Event { return w.out }
func (w *etcdWatcher) Stop()                    { w.cancel() }

// Watch streams the changes of every key under prefix.
func (s *Store) Watch(ctx context.Context, prefix string, o WatchOptions) (Watcher, error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if t := s.For(prefix); t != s {
		return t.Watch(ctx, prefix, o)
	}
	ctx, cancel := context.WithCancel(ctx)
	base := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
	if o.ProgressNotify {
		base = append(base, clientv3.WithProgressNotify())
	}
	open := func(rev int64) clientv3.WatchChan {
		opts := base
		if rev > 0 {
			opts = append(slices.Clip(opts), clientv3.WithRev(rev))
		}
		return s.client.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...)
	}
	var start int64
	if o.Revision > 0 {
		// From o.Revision itself, not o.Revision+1: the events of that revision are dropped
		// below. etcd sends no progress notification on a watch stream while one of its
		// watchers starts after the current revision, and a watch from "the revision just
		// listed + 1" is exactly that until the next write anywhere: every consistent read
		// of a watch cache sharing the stream (they all do) would wait for it.
		// (When etcd has compacted exactly that revision, run reopens from o.Revision+1.)
		start = o.Revision
	}
	w := &etcdWatcher{cancel: cancel, out: make(chan Event, 100)}
	wch := open(start)
	go w.run(ctx, s, wch, open, prefix, o)
	return w, nil
}

// run delivers the events of wch; open opens the etcd watch again from another revision.
func (w *etcdWatcher) run(ctx context.Context, s *Store, wch clientv3.WatchChan, open func(rev int64) clientv3.WatchChan, prefix string, o WatchOptions) {
	defer close(w.out)
	defer w.cancel()
	send := func(ev Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	reopened := false
	for {
		resp, ok := <-wch
		if !ok {
			break
		}
		if err := resp.Err(); err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, rpctypes.ErrCompacted) && !reopened && o.Revision > 0 && resp.CompactRevision == o.Revision+1 {
				// Only the revision Watch added was compacted: the changes after
				// o.Revision are all still there.
				reopened = true
				wch = open(o.Revision + 1)
				continue
			}
			if errors.Is(err, rpctypes.ErrCompacted) {
				err = &Error{Kind: ErrCompacted, Key: prefix, Requested: o.Revision, Current: resp.CompactRevision}
			}
			send(Event{Type: ErrorEvent, Err: err})
			return
		}
		if resp.IsProgressNotify() {
			if o.ProgressNotify && !send(Event{Type: Bookmark, Revision: resp.Header.Revision}) {
				return
			}
			continue
		}
		for _, e := range resp.Events {
			if e.Kv.ModRevision <= o.Revision {
				continue // already seen by the caller (see Watch)
			}
			ev, err := s.toEvent(e, o.LazyPrev && o.Predicate.Empty())
			if err != nil {
				send(Event{Type: ErrorEvent, Err: err})
				return
			}
			if ev, ok := filterEvent(ev, o.Predicate); ok {
				if !send(ev) {
					return
				}
			}
		}
	}
	if ctx.Err() == nil {
		send(Event{Type: ErrorEvent, Err: errors.New("etcd watch channel closed")})
	}
}

// toEvent decodes e; with lazyPrev the previous state of a modification is decoded only
// when Event.Prev asks for it.
func (s *Store) toEvent(e *clientv3.Event, lazyPrev bool) (Event, error) {
	key := string(e.Kv.Key)
	ev := Event{Key: key, Revision: e.Kv.ModRevision}
	var err error
	if pk := e.PrevKv; pk != nil {
		ev.PrevRevision = pk.ModRevision
		if lazyPrev && e.Type != mvccpb.DELETE && !e.IsCreate() {
			ev.prev = func() (*unstructured.Unstructured, error) {
				obj, _, _, err := s.decode(key, pk.Value, pk.ModRevision)
				return obj, err
			}
		} else if ev.PrevObject, _, _, err = s.decode(key, pk.Value, pk.ModRevision); err != nil {
			return ev, err
		}
	}
	switch {
	case e.Type == mvccpb.DELETE:
		ev.Type = Deleted
		if ev.PrevObject == nil {
			return ev, errorf(ErrInvalidObject, key, "delete event without the previous state")
		}
		ev.Object = ev.PrevObject.DeepCopy()
		setRevision(ev.Object, ev.Revision)
	case e.IsCreate():
		ev.Type = Added
		ev.PrevObject = nil
		ev.Object, _, _, err = s.decode(key, e.Kv.Value, e.Kv.ModRevision)
	default:
		ev.Type = Modified
		ev.Object, _, _, err = s.decode(key, e.Kv.Value, e.Kv.ModRevision)
	}
	return ev, err
}

// FilterEvent applies p to ev the way kube-apiserver does for selector watches: an update
// that makes an object match is delivered as Added, one that makes it stop matching as
// Deleted carrying the previous state at the event's revision. ok is false when the watcher
// must not see the event at all.
func FilterEvent(ev Event, p Predicate) (Event, bool) { return filterEvent(ev, p) }

func filterEvent(ev Event, p Predicate) (Event, bool) {
	if p.Empty() || ev.Type == Bookmark || ev.Type == ErrorEvent {
		return ev, true
	}
	switch ev.Type {
	case Added:
		return ev, p.Matches(ev.Object)
	case Deleted:
		return ev, p.Matches(ev.PrevObject)
	}
	cur, prev := p.Matches(ev.Object), p.Matches(ev.PrevObject)
	switch {
	case cur && prev:
		return ev, true
	case cur:
		ev.Type = Added
		return ev, true
	case prev:
		ev.Type = Deleted
		obj := ev.PrevObject.DeepCopy()
		setRevision(obj, ev.Revision)
		ev.Object = obj
		return ev, true
	}
	return ev, false
}

// RequestProgress asks etcd to send a progress notification (a Bookmark event, for watches
// opened with ProgressNotify) on every watch of this store's own cluster (For(prefix) names
// another's), telling how far each has got.
// A cache uses it as a fence: once the bookmark arrives, it has seen every change up to the
// revision read before the request.
func (s *Store) RequestProgress(ctx context.Context) error {
	return wrapEtcd("", s.client.RequestProgress(clientv3.WithRequireLeader(ctx)))
}
