package watchcache

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// WatchOptions select what a watch delivers.
type WatchOptions struct {
	// Revision: deliver the changes after this revision. It must still be in the cache's
	// event buffer, else Watch fails with an error wrapping storage.ErrCompacted ("too old
	// resource version"). A revision the cache has not reached yet is waited for (at most
	// Options.WaitTimeout, then an error wrapping storage.ErrFutureRevision). 0 starts now.
	Revision int64
	// SendInitialEvents first delivers one ADDED per matching object of a snapshot (taken
	// once the cache has reached Revision, or after the consistent fence), then one Bookmark
	// with InitialEventsEnd at the snapshot's revision, then every later change.
	SendInitialEvents bool
	// Consistent, with SendInitialEvents and Revision 0, takes the snapshot only once the
	// cache has caught up with storage's current revision (a consistent read).
	Consistent bool
	// Predicate filters events with storage.FilterEvent's semantics.
	Predicate storage.Predicate
	// Bookmarks asks for a Bookmark every Options.BookmarkInterval.
	Bookmarks bool
}

// watcher states
const (
	stateInit = iota // its goroutine is sending initial events; changes queue in pending
	stateLive        // the dispatcher sends to out directly
	stateDone        // ended
)

// Watcher delivers the events of one watch.
type Watcher struct {
	c         *Cache
	prefix    string
	pred      storage.Predicate
	bookmarks bool

	// out has one slot more than the buffer size: it is kept for the final ErrorEvent.
	out     chan *Event
	stopped chan struct{} // closed by Stop
	abort   chan struct{} // closed when the cache ends the watcher during its initial events

	mu       sync.Mutex
	state    int
	pending  []*Event
	termErr  error
	stopOnce sync.Once
	ctxStop  func() bool

	// guarded by c.mu: where the watcher is registered (cache.go's watcher lists)
	list       *watcherList
	idx        int
	ix         int // the index whose list holds it, -1 for a prefix list
	ixVal      string
	registered bool
}

// ResultChan delivers the events. It is closed when the watch ends; an ErrorEvent, when the
// cache ends the watch, is the last event before that.
func (w *Watcher) ResultChan() <-chan *Event { return w.out }

// Watch starts a watch of the keys under prefix (the resource's prefix or a narrower one,
// e.g. a namespace's). The watch ends when ctx ends, on Stop, or when the cache ends it.
func (c *Cache) Watch(ctx context.Context, prefix string, o WatchOptions) (*Watcher, error) {
	prefix, err := c.checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	minRev := o.Revision
	if o.SendInitialEvents && o.Revision == 0 && o.Consistent {
		if minRev, err = c.fence(ctx); err != nil {
			return nil, err
		}
	} else if minRev > 0 {
		if err := c.waitFor(ctx, minRev, false); err != nil {
			return nil, err
		}
	}
	size := c.o.WatcherBufferSize
	if _, _, narrowed := exactIndex(c.indexFields(), o.Predicate); !narrowed {
		size = c.o.UnindexedWatcherBufferSize
	}
	w := &Watcher{
		c:         c,
		prefix:    prefix,
		pred:      o.Predicate,
		bookmarks: o.Bookmarks,
		out:       make(chan *Event, size+1),
		stopped:   make(chan struct{}),
		abort:     make(chan struct{}),
	}
	var initial func(send func(*Event) bool) bool
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, ErrStopped
	}
	switch {
	case o.SendInitialEvents:
		snap, _, ok := c.indexedSnapshotLocked(o.Predicate)
		if !ok {
			snap = c.tree.Clone()
		}
		rev := c.rev
		initial = func(send func(*Event) bool) bool {
			ok := true
			snap.AscendGreaterOrEqual(&entry{key: prefix}, func(e *entry) bool {
				if !strings.HasPrefix(e.key, prefix) {
					return false
				}
				obj, err := e.object()
				if err != nil {
					send(errorEvent(err))
					ok = false
				} else if w.matches(obj) {
					ok = send(&Event{Event: storage.Event{Type: storage.Added, Key: e.key, Object: obj, Revision: e.rev}})
				}
				return ok
			})
			return ok && send(&Event{Event: storage.Event{Type: storage.Bookmark, Revision: rev}, InitialEventsEnd: true})
		}
	case o.Revision > 0:
		evs, ok := c.ring.since(o.Revision)
		if !ok {
			start := c.ring.start
			c.mu.Unlock()
			return nil, &storage.Error{Kind: storage.ErrCompacted, Key: prefix, Requested: o.Revision, Current: start}
		}
		if len(evs) > 0 {
			initial = func(send func(*Event) bool) bool {
				for _, ev := range evs {
					if !strings.HasPrefix(ev.Key, prefix) {
						continue
					}
					ev, err := unpackEvent(ev)
					if err != nil {
						send(errorEvent(err))
						return false
					}
					if e := newChange(ev, c.o.Attrs).forPredicate(w.pred); e != nil && !send(e) {
						return false
					}
				}
				return true
			}
		}
	}
	if initial != nil {
		w.state = stateInit
	} else {
		w.state = stateLive
	}
	c.addWatcherLocked(w)
	c.mu.Unlock()
	if initial != nil {
		go w.runInit(initial)
	}
	stop := context.AfterFunc(ctx, w.Stop)
	w.mu.Lock()
	w.ctxStop = stop
	w.mu.Unlock()
	return w, nil
}

func (w *Watcher) matches(obj *unstructured.Unstructured) bool {
	if w.pred.Empty() {
		return true
	}
	p := w.pred
	if p.Attrs == nil {
		p.Attrs = w.c.o.Attrs
	}
	return p.Matches(obj)
}

// runInit sends the initial events, then the changes that queued meanwhile, then hands the
// watcher over to the dispatcher.
func (w *Watcher) runInit(initial func(send func(*Event) bool) bool) {
	send := func(ev *Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-w.abort:
			return false
		case <-w.stopped:
			return false
		}
	}
	ok := initial(send)
	for ok {
		w.mu.Lock()
		if w.state != stateInit || isClosed(w.stopped) {
			w.mu.Unlock()
			break
		}
		if len(w.pending) == 0 {
			w.state = stateLive
			w.pending = nil
			w.mu.Unlock()
			return
		}
		batch := w.pending
		w.pending = make([]*Event, 0, len(batch))
		w.mu.Unlock()
		for _, ev := range batch {
			if ok = send(ev); !ok {
				break
			}
		}
	}
	w.mu.Lock()
	w.state = stateDone
	err := w.termErr
	w.pending = nil
	w.mu.Unlock()
	if err != nil {
		select {
		case w.out <- errorEvent(err):
		case <-w.stopped:
		}
	}
	close(w.out)
}

// pendingLimit bounds the changes queued behind a watcher's initial events: as many as the
// ring may hold (the queue shares the ring's events), since the initial events of a large
// resource (100,000 pods) take seconds while changes keep coming.
func (w *Watcher) pendingLimit() int {
	return max(w.c.o.WatcherBufferSize, w.c.o.EventBufferSize, w.c.o.MaxEventBufferSize)
}

// deliver offers ev without blocking. It returns false when the watcher is full and has been
// ended (the caller unregisters it).
func (w *Watcher) deliver(ev *Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case stateInit:
		if len(w.pending) >= w.pendingLimit() {
			w.endLocked(ErrTooSlow)
			return false
		}
		w.pending = append(w.pending, ev)
	case stateLive:
		if len(w.out) >= cap(w.out)-1 {
			w.endLocked(ErrTooSlow)
			return false
		}
		w.out <- ev
	}
	return true
}

// bookmark offers a bookmark if the watcher is live and has room.
func (w *Watcher) bookmark(ev *Event) {
	w.mu.Lock()
	if w.state == stateLive && len(w.out) < cap(w.out)-1 {
		w.out <- ev
	}
	w.mu.Unlock()
}

// terminate ends the watcher from the cache's side: with an ErrorEvent carrying err, or
// just closing the channel when err is nil. The caller has unregistered it.
func (w *Watcher) terminate(err error) {
	w.mu.Lock()
	w.endLocked(err)
	w.mu.Unlock()
}

func (w *Watcher) endLocked(err error) {
	switch w.state {
	case stateInit:
		// The goroutine owns out: it sends the error and closes.
		w.termErr = err
		w.state = stateDone
		close(w.abort)
	case stateLive:
		w.state = stateDone
		if err == nil {
			close(w.out)
			return
		}
		select {
		case w.out <- errorEvent(err): // the spare slot, normally
			close(w.out)
		default:
			// Full to the last slot (it went live with a full channel): deliver the error
			// once the client reads, or drop it when the client stops.
			go func() {
				select {
				case w.out <- errorEvent(err):
				case <-w.stopped:
				}
				close(w.out)
			}()
		}
	}
}

// Stop ends the watch and closes its channel. It may be called more than once.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.stopped)
		w.mu.Lock()
		if w.state == stateLive {
			close(w.out)
		}
		// In stateInit the goroutine sees stopped and closes out.
		if w.state != stateInit {
			w.state = stateDone
		}
		stop := w.ctxStop
		w.mu.Unlock()
		if stop != nil {
			stop()
		}
		w.c.mu.Lock()
		w.c.removeWatcherLocked(w)
		w.c.mu.Unlock()
	})
}

// affectedBy reports whether the watcher would have seen one of the changes.
func (w *Watcher) affectedBy(changes []*Event, attrs storage.AttrFunc) bool {
	for _, ev := range changes {
		if !strings.HasPrefix(ev.Key, w.prefix) {
			continue
		}
		ev, err := unpackEvent(ev)
		if err != nil || newChange(ev, attrs).forPredicate(w.pred) != nil {
			return true // a change it cannot judge counts as seen
		}
	}
	return false
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
