package watchcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
)

// entry is one object in the tree: decoded (obj), or packed in a packed cache (see pack.go).
// vals are its values of the indexed fields (index.go). Entries are never changed once in a
// tree.
type entry struct {
	key    string
	obj    *unstructured.Unstructured
	packed []byte
	rev    int64
	vals   []string
}

func lessEntry(a, b *entry) bool { return a.key < b.key }

type tree = btree.BTreeG[*entry]

func newTree() *tree { return btree.NewG(32, lessEntry) }

// relistPageSize bounds one etcd read while the cache lists.
const relistPageSize = 10000

// maxSnapshots is how many paged-list snapshots the cache keeps for continue tokens.
const maxSnapshots = 16

// Cache is the in-memory cache of one resource. Create it with New, run it with Start.
type Cache struct {
	o      Options
	prefix string

	ready     chan struct{} // closed when the first list is loaded (and replayed: catchUp)
	readyOnce sync.Once
	// catchUp is storage's revision when a cache with a StartRevision first listed: reads
	// wait until the replay of the changes since has reached it. Owned by the dispatcher.
	catchUp int64
	done    chan struct{} // closed when Start returns
	started atomic.Bool

	mu      sync.RWMutex
	tree    *tree
	rev     int64
	revCh   chan struct{} // closed when rev advances; nil when nobody waits
	ring    *ring
	loaded  bool // the first list is in
	stopped bool

	snaps     map[snapKey]*tree
	snapOrder []snapKey

	// Indexes (index.go), in the order of entry.vals; fields mirrors their names for reads
	// without the lock. Indexes are only ever appended.
	indexes  []*index
	fields   atomic.Pointer[[]string]
	freelist *btree.FreeListG[*entry]

	// Watchers, by the value of an indexed field their selector requires, else by the prefix
	// they watch: the whole resource, one namespace, or other.
	all    watcherList
	byNS   map[string]*watcherList
	others watcherList

	revision atomic.Int64

	// Owned by the dispatcher goroutine (Start).
	targets []*Watcher
}

type watcherList struct{ ws []*Watcher }

// New returns a cache; it does nothing until Start. It panics on invalid options (a
// programming error: Store and Prefix are required).
func New(o Options) *Cache {
	o.complete()
	if err := o.validate(); err != nil {
		panic(err)
	}
	c := &Cache{
		o:        o,
		prefix:   o.Prefix,
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
		tree:     newTree(),
		ring:     newRing(o.EventBufferSize, o.MaxEventBufferSize, o.EventFreshDuration, 0),
		snaps:    map[snapKey]*tree{},
		byNS:     map[string]*watcherList{},
		freelist: btree.NewFreeListG[*entry](btree.DefaultFreeListSize),
	}
	var names []string
	for _, f := range o.IndexFields {
		if f != "" && !slices.Contains(names, f) {
			names = append(names, f)
			c.indexes = append(c.indexes, newIndex(f))
		}
	}
	c.fields.Store(&names)
	return c
}

// Prefix is the resource prefix the cache holds.
func (c *Cache) Prefix() string { return c.prefix }

// Revision is the revision the cache has reached: every change up to it has been applied.
func (c *Cache) Revision() int64 { return c.revision.Load() }

// WaitReady waits until the first list is loaded, ctx ends (its error) or the cache stops
// (ErrStopped). Every read calls it: a stopped cache answers ErrStopped.
func (c *Cache) WaitReady(ctx context.Context) error {
	select {
	case <-c.done:
		return ErrStopped
	case <-c.ready:
		return nil
	default:
	}
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start fills the cache and keeps it current until ctx ends, then ends every watcher and
// returns nil. It lists the prefix, watches from the list's revision and lists again
// whenever the watch fails. It must be called once.
func (c *Cache) Start(ctx context.Context) error {
	if c.started.Swap(true) {
		return errors.New("watchcache: Start called twice")
	}
	defer c.shutdown()
	ticker := c.o.Clock.NewTicker(c.o.BookmarkInterval)
	defer ticker.Stop()
	backoff := 100 * time.Millisecond
	for {
		err := c.run(ctx, ticker.C())
		if ctx.Err() != nil {
			return nil
		}
		c.o.Log.Warn("watch cache lost its etcd watch, re-listing", "prefix", c.prefix, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-c.o.Clock.After(backoff):
		}
		if errors.Is(err, errWatchHealthy) {
			backoff = 100 * time.Millisecond
		} else if backoff *= 2; backoff > 5*time.Second {
			backoff = 5 * time.Second
		}
	}
}

// errWatchHealthy marks a watch that delivered events before failing: the back-off restarts.
var errWatchHealthy = errors.New("watch failed after delivering events")

// run lists, then follows one etcd watch until it fails.
func (c *Cache) run(ctx context.Context, tick <-chan time.Time) error {
	rev, err := c.relist(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", c.prefix, err)
	}
	if c.catchUp > 0 {
		if rev, err = c.replay(ctx, rev); err != nil {
			return fmt.Errorf("replay %s: %w", c.prefix, err)
		}
	}
	w, err := c.o.Store.Watch(ctx, c.prefix, storage.WatchOptions{Revision: rev, ProgressNotify: true, LazyPrev: true})
	if err != nil {
		return fmt.Errorf("watch %s: %w", c.prefix, err)
	}
	defer w.Stop()
	healthy := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			c.sendBookmarks()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch %s: channel closed", c.prefix)
			}
			switch ev.Type {
			case storage.ErrorEvent:
				if healthy {
					return fmt.Errorf("%w: %w", errWatchHealthy, ev.Err)
				}
				return ev.Err
			case storage.Bookmark:
				c.mu.Lock()
				c.setRevLocked(ev.Revision)
				c.mu.Unlock()
			default:
				healthy = true
				c.apply(ev)
			}
		}
	}
}

// relist loads every object of the prefix and swaps the tree. Watchers that would miss a
// change between what they were sent and the new list end with ErrCompacted.
func (c *Cache) relist(ctx context.Context) (int64, error) {
	t := newTree()
	var rev int64
	fields := c.indexFields()
	opts := storage.ListOptions{Limit: relistPageSize}
	if !c.isLoaded() && c.o.StartRevision > 0 {
		if err := c.planReplay(ctx, &opts); err != nil {
			return 0, err
		}
	}
	for {
		res, err := c.o.Store.List(ctx, c.prefix, opts)
		if err != nil {
			return 0, err
		}
		rev = res.Revision
		for _, obj := range res.Items {
			r, _ := storage.Revision(obj)
			t.ReplaceOrInsert(c.newEntry(keyOf(c.prefix, obj), obj, r, fields))
		}
		if res.Continue == "" {
			break
		}
		opts.Continue = res.Continue
	}
	built := make([]map[string]*tree, len(fields))
	for i := range built {
		built[i] = map[string]*tree{}
	}
	if len(fields) > 0 {
		t.Ascend(func(e *entry) bool {
			for i, v := range e.vals {
				it := built[i][v]
				if it == nil {
					it = c.newIndexTree()
					built[i][v] = it
				}
				it.ReplaceOrInsert(e)
			}
			return true
		})
	}

	c.mu.Lock()
	var dead []*Watcher
	if !c.loaded {
		c.loaded = true
		c.ring.reset(rev)
	} else if diff := diffTrees(c.tree, t, rev); len(diff) > 0 {
		// The changes between the old state and the new list are not known as events:
		// nobody can resume from before the list, and a watcher that would have seen one
		// of them has lost its resume point.
		c.ring.reset(rev)
		for _, w := range c.allWatchersLocked(nil) {
			if w.affectedBy(diff, c.o.Attrs) {
				dead = append(dead, w)
			}
		}
		for _, w := range dead {
			c.removeWatcherLocked(w)
		}
	}
	lost := &storage.Error{Kind: storage.ErrCompacted, Key: c.prefix, Requested: c.rev, Current: rev}
	c.tree = t
	if len(fields) == len(c.indexes) {
		for i, ix := range c.indexes {
			ix.entries = built[i]
		}
	} else {
		c.reindexLocked() // an index was added while the cache listed
	}
	c.setRevLocked(rev)
	c.mu.Unlock()
	for _, w := range dead {
		w.terminate(lost)
	}
	if rev >= c.catchUp {
		c.readyOnce.Do(func() { close(c.ready) })
	}
	return rev, nil
}

func (c *Cache) isLoaded() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loaded
}

// planReplay makes the first list read at Options.StartRevision (or, when etcd compacted
// past it, at the oldest revision it still has) and records the revision the replay must
// reach before reads are served. Nothing to replay: the list reads the latest state.
func (c *Cache) planReplay(ctx context.Context, opts *storage.ListOptions) error {
	cur, err := c.o.Store.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	from := c.o.StartRevision
	if from >= cur {
		return nil
	}
	if floor, err := c.compactedSince(ctx, from); err != nil {
		return err
	} else if floor > from {
		from = floor
	}
	if from >= cur {
		return nil
	}
	opts.Revision, opts.Exact = from, true
	c.catchUp = cur
	return nil
}

// compactedSince returns etcd's compaction revision when it is past rev, else 0: a watch
// from rev fails at once with it.
func (c *Cache) compactedSince(ctx context.Context, rev int64) (int64, error) {
	// Its own gRPC stream, as replay's: the progress answer must not wait for other watchers.
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "kube-watchcache-replay", c.prefix), c.o.WaitTimeout)
	defer cancel()
	w, err := c.o.Store.Watch(ctx, c.prefix, storage.WatchOptions{Revision: rev, ProgressNotify: true, LazyPrev: true})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	// A progress request that reaches etcd before the watch is registered goes unanswered:
	// ask again until something arrives.
	retry := c.o.Clock.NewTicker(replayProgressRetry)
	defer retry.Stop()
	for {
		if err := c.o.Store.RequestProgress(ctx); err != nil {
			return 0, err
		}
		select {
		case ev, ok := <-w.ResultChan():
			var serr *storage.Error
			if ok && ev.Type == storage.ErrorEvent && errors.As(ev.Err, &serr) && errors.Is(serr.Kind, storage.ErrCompacted) {
				return serr.Current, nil
			}
			return 0, nil
		case <-retry.C():
		case <-ctx.Done():
			return 0, nil // no answer in time: nothing compacted that we could see
		}
	}
}

// replayProgressRetry is how often a replay asks its own stream for progress again.
const replayProgressRetry = 20 * time.Millisecond

// replay applies the resource's changes after rev, up to storage's revision now, through a
// watch on a gRPC stream of its own: etcd answers a progress request only once every
// watcher of the stream is synced, so on its own stream the progress notification says
// exactly "the replay has caught up". It returns the revision reached and serves reads.
func (c *Cache) replay(ctx context.Context, rev int64) (int64, error) {
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "kube-watchcache-replay", c.prefix))
	defer cancel()
	w, err := c.o.Store.Watch(ctx, c.prefix, storage.WatchOptions{Revision: rev, ProgressNotify: true, LazyPrev: true})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	if err := c.o.Store.RequestProgress(ctx); err != nil {
		return 0, err
	}
	retry := c.o.Clock.NewTicker(replayProgressRetry)
	defer retry.Stop()
	for rev < c.catchUp {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-retry.C():
			if err := c.o.Store.RequestProgress(ctx); err != nil {
				return 0, err
			}
		case ev, ok := <-w.ResultChan():
			switch {
			case !ok:
				return 0, errors.New("replay watch closed")
			case ev.Type == storage.ErrorEvent:
				return 0, ev.Err
			case ev.Type == storage.Bookmark:
				c.mu.Lock()
				c.setRevLocked(ev.Revision)
				c.mu.Unlock()
			default:
				c.apply(ev)
			}
			rev = c.Revision()
		}
	}
	c.catchUp = 0
	c.readyOnce.Do(func() { close(c.ready) })
	return rev, nil
}

// keyOf rebuilds an object's key from its namespace and name. The store's List does not
// return keys; every object under a resource prefix is stored at prefix[ns/]name.
func keyOf(prefix string, obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return prefix + ns + "/" + obj.GetName()
	}
	return prefix + obj.GetName()
}

// diffTrees returns the changes that turn old into cur, as events at revision rev (packed
// ones, for a packed cache's entries: unpackEvent decodes them).
func diffTrees(old, cur *tree, rev int64) []*Event {
	var out []*Event
	cur.Ascend(func(e *entry) bool {
		o, ok := old.Get(e)
		switch {
		case !ok:
			out = append(out, entryEvent(storage.Added, e.key, rev, e, nil))
		case o.rev != e.rev:
			out = append(out, entryEvent(storage.Modified, e.key, rev, e, o))
		}
		return true
	})
	old.Ascend(func(o *entry) bool {
		if !cur.Has(o) {
			out = append(out, entryEvent(storage.Deleted, o.key, rev, nil, o))
		}
		return true
	})
	return out
}

// apply records one change and offers it to the watchers.
func (c *Cache) apply(sev storage.Event) {
	ev := &Event{Event: sev}
	var cur *entry
	if sev.Type == storage.Added || sev.Type == storage.Modified {
		cur = c.newEntry(sev.Key, sev.Object, sev.Revision, c.indexFields()) // packs outside the lock
	}
	c.mu.Lock()
	old, _ := c.tree.Get(&entry{key: sev.Key})
	if cur != nil {
		cur, _ = c.valuesLocked(cur, sev.Object)
		c.tree.ReplaceOrInsert(cur)
	} else if sev.Type == storage.Deleted {
		c.tree.Delete(&entry{key: sev.Key})
	}
	if len(c.indexes) > 0 && (cur != nil || sev.Type == storage.Deleted) {
		c.indexUpdateLocked(old, cur)
	}
	var curVals, prevVals []string
	if cur != nil {
		curVals = cur.vals
	}
	// The previous state is the tree's entry when it is at the event's previous revision
	// (always, unless the tree missed a change): storage's copy of it is then not decoded
	// at all (a LazyPrev watch). Otherwise it is decoded now.
	prevRev := prevRevision(sev)
	oldMatches := old != nil && prevRev != 0 && old.rev == prevRev
	if prevRev != 0 && !oldMatches && sev.PrevObject == nil {
		if p, err := sev.Prev(); err == nil {
			sev.PrevObject, ev.PrevObject = p, p
		}
	}
	if len(c.indexes) > 0 {
		if oldMatches {
			prevVals = old.vals
		} else if sev.PrevObject != nil {
			prevVals = indexValues(c.o.Attrs, c.indexFields(), sev.PrevObject)
		}
	}
	if oldMatches && old.obj != nil {
		// The ring keeps the tree's copy of the previous state rather than storage's.
		ev.PrevObject = old.obj
	}
	if c.o.Pack {
		if !oldMatches {
			// The tree's entry is not the previous state: storage's copy (if any) is.
			old = nil
			if sev.PrevObject != nil {
				old = c.newEntry(sev.Key, sev.PrevObject, revOf(sev.PrevObject), nil)
			}
		}
		c.ring.push(entryEvent(sev.Type, sev.Key, sev.Revision, cur, old), c.o.Clock.Now())
	} else {
		// A decoded cache's event has its previous state (the tree's copy, or decoded
		// above): the ring must not hold storage's bytes of it too.
		ev.Event = ev.Event.Settled()
		c.ring.push(ev, c.o.Clock.Now())
	}
	c.setRevNoPublishLocked(sev.Revision)
	targets := c.targetsLocked(sev.Key, curVals, prevVals, c.targets[:0])
	c.mu.Unlock()

	ch := newChange(ev, c.o.Attrs)
	if oldMatches {
		ch.withPrevIndex(c.indexFields(), prevVals)
	}
	var dead []*Watcher
	for _, w := range targets {
		if !strings.HasPrefix(sev.Key, w.prefix) {
			continue
		}
		e := ch.forPredicate(w.pred)
		if e == nil {
			continue
		}
		if !w.deliver(e) {
			dead = append(dead, w)
		}
	}
	clear(targets)
	c.targets = targets[:0]
	c.forget(dead)
	c.revision.Store(sev.Revision)
}

// prevRevision is the revision of an event's previous state (0: none).
func prevRevision(sev storage.Event) int64 {
	if sev.PrevRevision != 0 {
		return sev.PrevRevision
	}
	if sev.PrevObject != nil {
		return revOf(sev.PrevObject)
	}
	return 0
}

// sendBookmarks offers a bookmark at the cache's revision to every watcher that asked for
// bookmarks. A full watcher skips it: bookmarks are optional.
func (c *Cache) sendBookmarks() {
	c.mu.Lock()
	rev := c.rev
	targets := c.allWatchersLocked(c.targets[:0])
	c.mu.Unlock()
	if rev > 0 {
		ev := &Event{Event: storage.Event{Type: storage.Bookmark, Revision: rev}}
		for _, w := range targets {
			if w.bookmarks {
				w.bookmark(ev)
			}
		}
	}
	clear(targets)
	c.targets = targets[:0]
}

func (c *Cache) forget(ws []*Watcher) {
	if len(ws) == 0 {
		return
	}
	c.mu.Lock()
	for _, w := range ws {
		c.removeWatcherLocked(w)
	}
	c.mu.Unlock()
}

// setRevLocked advances the cache's revision and wakes whoever waits for it.
func (c *Cache) setRevLocked(rev int64) {
	c.setRevNoPublishLocked(rev)
	c.revision.Store(c.rev)
}

// setRevNoPublishLocked advances the revision for readers under c.mu, but not yet Revision():
// apply publishes it once the change has been offered to every watcher, so that Revision()
// >= r means every event up to r is in the watchers' channels or queues.
func (c *Cache) setRevNoPublishLocked(rev int64) {
	if rev <= c.rev {
		return
	}
	c.rev = rev
	if c.revCh != nil {
		close(c.revCh)
		c.revCh = nil
	}
}

// shutdown ends every watcher when Start returns.
func (c *Cache) shutdown() {
	c.mu.Lock()
	c.stopped = true
	ws := c.allWatchersLocked(nil)
	for _, w := range ws {
		c.removeWatcherLocked(w)
	}
	c.mu.Unlock()
	close(c.done)
	for _, w := range ws {
		w.terminate(nil)
	}
}

// waitFor waits until the cache has reached rev, at most WaitTimeout. With progress, it asks
// etcd for progress notifications meanwhile, so that an idle resource's cache advances.
func (c *Cache) waitFor(ctx context.Context, rev int64, progress bool) error {
	if c.Revision() >= rev {
		return nil
	}
	timer := c.o.Clock.NewTimer(c.o.WaitTimeout)
	defer timer.Stop()
	var tick <-chan time.Time
	if progress {
		if err := c.o.Store.RequestProgress(ctx); err != nil {
			return err
		}
		// etcd answers a progress request only while every watcher of the stream is synced
		// (a new watch is not, for up to 100 ms): ask again as often as kube-apiserver does.
		t := c.o.Clock.NewTicker(min(progressRetry, c.o.WaitTimeout/6))
		defer t.Stop()
		tick = t.C()
	}
	for {
		c.mu.Lock()
		cur := c.rev
		if cur >= rev {
			c.mu.Unlock()
			return nil
		}
		if c.revCh == nil {
			c.revCh = make(chan struct{})
		}
		ch := c.revCh
		c.mu.Unlock()
		select {
		case <-ch:
		case <-tick:
			if err := c.o.Store.RequestProgress(ctx); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrStopped
		case <-timer.C():
			return &storage.Error{Kind: storage.ErrFutureRevision, Key: c.prefix, Requested: rev, Current: c.Revision(),
				Detail: "the watch cache did not reach it in time"}
		}
	}
}

// progressRetry is how often a wait for the cache to reach a revision asks etcd for
// progress again.
const progressRetry = 100 * time.Millisecond

// fence returns storage's current revision once the cache has reached it.
func (c *Cache) fence(ctx context.Context) (int64, error) {
	rev, err := c.o.Store.CurrentRevision(ctx)
	if err != nil {
		return 0, err
	}
	return rev, c.waitFor(ctx, rev, true)
}

// checkPrefix normalises a caller's prefix and makes sure it lies inside the cache's.
func (c *Cache) checkPrefix(prefix string) (string, error) {
	if prefix == "" {
		return c.prefix, nil
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if !strings.HasPrefix(prefix, c.prefix) {
		return "", fmt.Errorf("watchcache: prefix %q is outside the cache's %q", prefix, c.prefix)
	}
	return prefix, nil
}

// nsPrefix is the namespace prefix of key (prefix + first segment + "/"), or "" for a
// cluster-scoped key.
func (c *Cache) nsPrefix(key string) string {
	rest := key[len(c.prefix):]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return key[:len(c.prefix)+i+1]
	}
	return ""
}

// isNSPrefix reports whether prefix is one namespace of the resource.
func (c *Cache) isNSPrefix(prefix string) bool {
	rest := prefix[len(c.prefix):]
	return len(rest) > 1 && strings.IndexByte(rest, '/') == len(rest)-1
}

// listForLocked returns the list a new watcher belongs in, creating it, and records where
// it is: the list of the value of the first indexed field its selector requires, else the
// list of the prefix it watches.
func (c *Cache) listForLocked(w *Watcher) *watcherList {
	w.ix = -1
	if i, v, ok := exactIndex(c.indexFields(), w.pred); ok {
		ix := c.indexes[i]
		l := ix.watchers[v]
		if l == nil {
			l = &watcherList{}
			ix.watchers[v] = l
		}
		w.ix, w.ixVal = i, v
		return l
	}
	switch {
	case w.prefix == c.prefix:
		return &c.all
	case c.isNSPrefix(w.prefix):
		l := c.byNS[w.prefix]
		if l == nil {
			l = &watcherList{}
			c.byNS[w.prefix] = l
		}
		return l
	}
	return &c.others
}

func (c *Cache) addWatcherLocked(w *Watcher) {
	l := c.listForLocked(w)
	w.list = l
	w.idx = len(l.ws)
	l.ws = append(l.ws, w)
	w.registered = true
}

func (c *Cache) removeWatcherLocked(w *Watcher) {
	if !w.registered {
		return
	}
	w.registered = false
	l := w.list
	last := l.ws[len(l.ws)-1]
	l.ws[w.idx] = last
	last.idx = w.idx
	l.ws[len(l.ws)-1] = nil
	l.ws = l.ws[:len(l.ws)-1]
	w.list = nil
	if len(l.ws) > 0 {
		return
	}
	switch {
	case w.ix >= 0:
		delete(c.indexes[w.ix].watchers, w.ixVal)
	case l != &c.all && l != &c.others:
		delete(c.byNS, w.prefix)
	}
}

// targetsLocked appends the watchers that may be interested in a change of key whose new
// and previous states have the indexed values cur and prev (nil: no such state). Each
// watcher is in one list, so none is appended twice.
func (c *Cache) targetsLocked(key string, cur, prev []string, out []*Watcher) []*Watcher {
	out = append(out, c.all.ws...)
	if ns := c.nsPrefix(key); ns != "" {
		if l := c.byNS[ns]; l != nil {
			out = append(out, l.ws...)
		}
	}
	out = append(out, c.others.ws...)
	for i, ix := range c.indexes {
		if len(ix.watchers) == 0 {
			continue
		}
		if i < len(cur) {
			if l := ix.watchers[cur[i]]; l != nil {
				out = append(out, l.ws...)
			}
		}
		if i < len(prev) && (i >= len(cur) || prev[i] != cur[i]) {
			if l := ix.watchers[prev[i]]; l != nil {
				out = append(out, l.ws...)
			}
		}
	}
	return out
}

func (c *Cache) allWatchersLocked(out []*Watcher) []*Watcher {
	out = append(out, c.all.ws...)
	for _, l := range c.byNS {
		out = append(out, l.ws...)
	}
	out = append(out, c.others.ws...)
	for _, ix := range c.indexes {
		for _, l := range ix.watchers {
			out = append(out, l.ws...)
		}
	}
	return out
}

// watcherCount is the number of registered watchers.
func (c *Cache) watcherCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.all.ws) + len(c.others.ws)
	for _, l := range c.byNS {
		n += len(l.ws)
	}
	for _, ix := range c.indexes {
		for _, l := range ix.watchers {
			n += len(l.ws)
		}
	}
	return n
}
