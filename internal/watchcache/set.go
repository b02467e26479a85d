package watchcache

import (
	"context"
	"slices"
	"strings"
	"sync"

	"kubeos.dev/kube/internal/storage"
)

// Set holds one Cache per resource prefix and starts each on first use, so that a resource
// nobody lists or watches costs nothing; a cache started late replays the resource's
// history from when the set was made (Options.StartRevision), as if it had run since.
type Set struct {
	ctx      context.Context
	defaults Options
	// clusters is defaults.Store when it keeps resources in several etcd clusters; starts
	// holds each cluster's StartRevision.
	clusters clusters
	starts   map[*storage.Store]int64

	mu     sync.Mutex
	caches map[string]*setEntry
}

type setEntry struct {
	c      *Cache
	cancel context.CancelFunc
	done   chan struct{}
}

// clusters is a Store that keeps some resources in etcd clusters of their own
// (storage.Store.WithOverrides, --etcd-servers-overrides): each cache is fed by the store of
// its prefix's cluster, from that cluster's revisions.
type clusters interface {
	For(prefix string) *storage.Store
	Clusters() []*storage.Store
}

var _ clusters = (*storage.Store)(nil)

// NewSet returns an empty set. ctx bounds the life of every cache it starts; defaults
// supply every Options field but Prefix and Attrs. Unless defaults name a StartRevision,
// it is storage's revision now: every cache the set starts later replays the resource's
// changes since, so starting caches on first use loses no history a client could ask for.
// When defaults.Store keeps resources in several etcd clusters (a *storage.Store with
// overrides), each cache reads the store of its own cluster and starts at that cluster's
// revision now.
func NewSet(ctx context.Context, defaults Options) *Set {
	s := &Set{ctx: ctx, defaults: defaults, caches: map[string]*setEntry{}}
	if cl, ok := defaults.Store.(clusters); ok && len(cl.Clusters()) > 1 {
		s.clusters = cl
		if defaults.StartRevision == 0 {
			s.starts = map[*storage.Store]int64{}
			for _, st := range cl.Clusters() {
				rev, err := st.CurrentRevision(ctx)
				if err != nil && defaults.Log != nil {
					defaults.Log.Warn("watch cache: no start revision for an etcd cluster; its caches start at their first list", "err", err)
				}
				s.starts[st] = rev
			}
		}
		return s
	}
	if defaults.StartRevision == 0 && defaults.Store != nil {
		if rev, err := defaults.Store.CurrentRevision(ctx); err == nil {
			s.defaults.StartRevision = rev
		}
	}
	return s
}

// Get returns the cache of prefix, creating and starting it on the first call. attrs (nil:
// storage.DefaultAttrs) is used only then. indexed are the fields the cache must index
// (Options.IndexFields, beside the defaults'): a cache started without one of them builds
// its index at once, so callers that pass no fields (a get by name) may come first.
func (s *Set) Get(prefix string, attrs storage.AttrFunc, indexed ...string) *Cache {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s.mu.Lock()
	if e, ok := s.caches[prefix]; ok {
		s.mu.Unlock()
		e.c.ensureIndexes(indexed) // every request's path: nothing allocated
		return e.c
	}
	defer s.mu.Unlock()
	o := s.defaults
	o.Prefix, o.Attrs = prefix, attrs
	if s.clusters != nil {
		st := s.clusters.For(prefix)
		o.Store = st
		if s.starts != nil {
			o.StartRevision = s.starts[st]
		} else if st != s.clusters.Clusters()[0] {
			o.StartRevision = 0 // a StartRevision given is the main cluster's
		}
	}
	if len(indexed) > 0 {
		o.IndexFields = append(slices.Clone(o.IndexFields), indexed...)
	}
	o.complete()
	if o.PackPrefix != nil && o.PackPrefix(o.Prefix) {
		o.Pack = true
	}
	c := New(o)
	ctx, cancel := context.WithCancel(s.ctx)
	e := &setEntry{c: c, cancel: cancel, done: make(chan struct{})}
	s.caches[o.Prefix] = e
	go func() {
		defer close(e.done)
		_ = c.Start(ctx)
	}()
	return c
}

// Packed reports whether the cache of prefix keeps its objects packed (Options.PackPrefix),
// without starting it: callers keep no copies of their own of such objects either.
func (s *Set) Packed(prefix string) bool {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return s.defaults.PackPrefix != nil && s.defaults.PackPrefix(prefix)
}

// Stop stops the cache of prefix, if any, ends its watchers and forgets it; the next Get
// starts a new one.
func (s *Set) Stop(prefix string) {
	o := Options{Prefix: prefix}
	o.complete()
	s.mu.Lock()
	e, ok := s.caches[o.Prefix]
	delete(s.caches, o.Prefix)
	s.mu.Unlock()
	if ok {
		e.cancel()
		<-e.done
	}
}

// Prefixes lists the prefixes of the caches started so far.
func (s *Set) Prefixes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.caches))
	for p := range s.caches {
		out = append(out, p)
	}
	return out
}
