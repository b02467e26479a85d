package watchcache

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"kubeos.dev/kube/internal/storage"
)

// Store is what a cache needs from storage.
type Store interface {
	List(ctx context.Context, prefix string, o storage.ListOptions) (*storage.ListResult, error)
	Watch(ctx context.Context, prefix string, o storage.WatchOptions) (storage.Watcher, error)
	CurrentRevision(ctx context.Context) (int64, error)
	RequestProgress(ctx context.Context) error
}

var _ Store = (*storage.Store)(nil)

// compactRevisioner is implemented by a Store that knows how far etcd has compacted its
// history: the cache then serves no continue token of a compacted revision from a snapshot.
type compactRevisioner interface{ CompactRevision() int64 }

var _ compactRevisioner = (*storage.Store)(nil)

// Options configure a Cache. Zero values take the defaults noted on each field.
type Options struct {
	// Store the cache is fed from. Required.
	Store Store
	// Prefix of the resource's keys, ending in "/", e.g. storage.ResourcePrefix("", "configmaps").
	// Required.
	Prefix string
	// Attrs extracts the fields selectors may name. Default storage.DefaultAttrs.
	Attrs storage.AttrFunc
	// IndexFields are selectable fields (names Attrs returns, e.g. "spec.nodeName" for pods)
	// the cache indexes: a list or watch whose field selector requires one of them to equal
	// one value reads only the objects with that value, and a change is offered only to the
	// watchers of its old and new values (plus the watchers without such a selector). Every
	// predicate given to the cache must then extract the indexed fields as Attrs does. In
	// the defaults of a Set, the fields every cache indexes. Default: none.
	IndexFields []string
	// Pack keeps the objects as deflated JSON and decodes them on every read (List, Get,
	// initial events, resumed watches): about a tenth of the memory, for resources whose
	// objects are large and read rarely, such as CustomResourceDefinitions. Live events are
	// delivered as storage decoded them. Default false.
	Pack bool
	// PackPrefix, in the defaults of a Set, sets Pack for the caches of the prefixes it
	// returns true for. Default: none.
	PackPrefix func(prefix string) bool
	// StartRevision is where the resource's history starts for this cache: a cache started
	// later (a Set starts them on first use) first loads the state at StartRevision and
	// replays every change since, so that a watch from any revision returned after
	// StartRevision is served as if the cache had run from then on — the client that
	// writes, then watches from its write's resourceVersion, sees its own change. When etcd
	// has compacted past StartRevision the cache starts at the oldest revision etcd still
	// has. Reads wait until the replay has caught up with storage. In the defaults of a Set,
	// NewSet sets it to storage's revision when the Set is made. Default 0: history starts
	// at the cache's first list.
	StartRevision int64
	// EventBufferSize is how many recent events the cache keeps for watches to resume from.
	// Default 1000. It is the least: see MaxEventBufferSize.
	EventBufferSize int
	// MaxEventBufferSize is the most recent events the cache keeps. Between EventBufferSize
	// and this, the buffer doubles when full while its oldest event is younger than
	// EventFreshDuration and halves when even its newest quarter is older, as kube-apiserver's
	// watch cache (100 to 102,400 events, 75 s): a busy resource keeps about 75 s of history,
	// so a watch that reconnects after a pause resumes instead of answering 410 and making its
	// client re-list. Default (0) or less than EventBufferSize: a fixed EventBufferSize.
	MaxEventBufferSize int
	// EventFreshDuration: see MaxEventBufferSize. Default 75 s.
	EventFreshDuration time.Duration
	// WatcherBufferSize is the capacity of the channel of a watcher whose field selector
	// names one value of an indexed field (a node's pods). A watcher whose channel is full
	// is ended with an ErrorEvent wrapping ErrTooSlow. Default 100.
	WatcherBufferSize int
	// UnindexedWatcherBufferSize is the capacity of the channel of other watchers: a watcher
	// of every change (an informer) gets bursts a node's watcher does not. Default 1,000,
	// as kube-apiserver's (10 for a watcher narrowed by its trigger index).
	UnindexedWatcherBufferSize int
	// BookmarkInterval is how often watchers that asked for bookmarks get one. Default 5 s.
	BookmarkInterval time.Duration
	// WaitTimeout bounds how long a read waits for the cache to reach a revision (not older
	// than, or the consistent-read fence). Default 3 s, as kube-apiserver.
	WaitTimeout time.Duration
	// Clock drives bookmarks, waits and re-list back-off. Default the real clock.
	Clock clock.WithTicker
	// Log receives the cache's warnings (failed lists and watches). Default: discarded.
	Log *slog.Logger
}

// Defaults.
const (
	DefaultEventBufferSize            = 1000
	DefaultWatcherBufferSize          = 100
	DefaultUnindexedWatcherBufferSize = 1000
	DefaultBookmarkInterval           = 5 * time.Second
	DefaultEventFreshDuration         = 75 * time.Second
	DefaultWaitTimeout                = 3 * time.Second
)

// complete fills in the defaults.
func (o *Options) complete() {
	if o.Attrs == nil {
		o.Attrs = storage.DefaultAttrs
	}
	if o.EventBufferSize <= 0 {
		o.EventBufferSize = DefaultEventBufferSize
	}
	if o.EventFreshDuration <= 0 {
		o.EventFreshDuration = DefaultEventFreshDuration
	}
	if o.WatcherBufferSize <= 0 {
		o.WatcherBufferSize = DefaultWatcherBufferSize
	}
	if o.UnindexedWatcherBufferSize <= 0 {
		o.UnindexedWatcherBufferSize = DefaultUnindexedWatcherBufferSize
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = DefaultBookmarkInterval
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
}

// validate names the first bad field.
func (o *Options) validate() error {
	if o.Store == nil {
		return errors.New("watchcache: Options.Store is required")
	}
	if o.Prefix == "" || o.Prefix == "/" {
		return errors.New("watchcache: Options.Prefix is required")
	}
	return nil
}
