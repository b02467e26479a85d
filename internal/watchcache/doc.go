// Package watchcache serves lists and watches of one resource from memory, fed by a single
// etcd watch, the way kube-apiserver's cacher does.
//
// A Cache holds every object under one resource prefix (for example
// storage.ResourcePrefix("", "configmaps")) in a copy-on-write B-tree keyed by etcd key, and
// the most recent changes in a ring buffer. Start lists the prefix from storage, then opens
// ONE etcd watch (with progress notifications) from the list's revision and applies every
// change to the tree, the ring and the watchers. When that watch fails (etcd compacted past
// it, the leader was lost, ...) the cache lists again: watchers that would have missed a
// change in the gap are ended with an ErrorEvent wrapping storage.ErrCompacted (their clients
// re-list), the others carry on.
//
// Reads:
//
//   - List with Revision 0 and not Consistent answers from whatever the cache holds
//     (resourceVersion=0). With Revision > 0 it waits until the cache has reached that
//     revision ("not older than"), at most Options.WaitTimeout, then fails with an error
//     wrapping storage.ErrFutureRevision (504 at the API, as upstream). With Consistent it
//     first reads storage's current revision and waits until the cache has reached it,
//     asking etcd for a progress notification so that an idle resource's cache catches up
//     without a write; if that fence times out the list is served by storage instead.
//   - Limit and Continue page through one snapshot (a B-tree Clone). Continue tokens have
//     storage's format; when the cache no longer holds the snapshot a token names, the page is
//     read from storage at that exact revision (which answers ErrCompacted once etcd has
//     compacted it, 410 at the API).
//   - Get reads one key from memory.
//
// Watch delivers events after a revision that must still be in the ring buffer (else an
// error wrapping storage.ErrCompacted: "too old resource version"). With SendInitialEvents it
// first delivers one ADDED per matching object of a snapshot, then one Bookmark with
// InitialEventsEnd at the snapshot's revision, then every later change: no gap, no
// duplicate. A Predicate filters with storage.FilterEvent's semantics (an object that starts
// matching arrives as ADDED, one that stops matching as DELETED carrying its previous state).
// Watchers that asked for bookmarks get one every Options.BookmarkInterval.
//
// Fan-out: one dispatcher goroutine per cache applies each change and offers it to every
// interested watcher with a non-blocking send on the watcher's buffered channel. A watcher
// whose channel is full is ended with an ErrorEvent wrapping ErrTooSlow; it never delays the
// others. A watcher needs its own goroutine only while it is being sent its initial events
// (snapshot or ring replay); changes that arrive meanwhile queue behind them.
//
// Indexes: Options.IndexFields (or Set.Get's fields) name selectable fields the cache
// indexes, as kube-apiserver's cacher indexes pods by spec.nodeName. A list, or the initial
// events of a watch, whose field selector requires an indexed field to equal one value reads
// only the objects with that value; a watcher with such a selector is registered under the
// value, and a change is offered only to the watchers of its new and previous values (plus
// the watchers without an indexed selector). So 5,000 node agents watching
// spec.nodeName=<node> each cost what their own pods cost. Results are the same as without
// the index: the index only narrows what the predicate is applied to.
//
// Event.Encoded memoises one encoding per output format, so an event fanned out to N
// watchers is encoded once per format, not N times.
//
// Every read first waits until the first list is loaded (WaitReady), bounded only by the
// caller's context; a stopped cache answers ErrStopped.
//
// Objects returned by List, Get and in events are shared between all readers and the cache
// itself: they are READ-ONLY. DeepCopy before changing one.
//
// Set creates caches lazily, one per resource prefix, on first use, so that a resource
// nobody lists or watches (a CRD registered but unused) costs no goroutine and no memory.
// Over a storage.Store that keeps some resources in etcd clusters of their own
// (--etcd-servers-overrides), each cache is fed by, fences on and asks progress of its own
// resource's cluster, and its revisions are that cluster's.
//
// Usage:
//
//	c := watchcache.New(watchcache.Options{Store: store, Prefix: storage.ResourcePrefix("", "configmaps")})
//	go c.Start(ctx)
//	res, err := c.List(ctx, storage.NamespacePrefix("", "configmaps", "default"), watchcache.ListOptions{Consistent: true})
//	w, err := c.Watch(ctx, prefix, watchcache.WatchOptions{Revision: res.Revision, Bookmarks: true})
//	for ev := range w.ResultChan() { ... }
package watchcache
