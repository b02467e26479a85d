package watchcache

import (
	"errors"
	"sync"

	"kubeos.dev/kube/internal/storage"
)

// Errors the cache returns besides storage's sentinels.
var (
	// ErrTooSlow ends a watcher whose channel was full when an event had to be delivered.
	// kube-apiserver simply closes such a watch; the client re-watches from the last
	// resourceVersion it saw.
	ErrTooSlow = errors.New("watcher too slow: its event buffer is full")
	// ErrStopped: the cache was stopped (server shutdown, or the resource was removed).
	ErrStopped = errors.New("watch cache stopped")
)

// Event is one event delivered to a watcher. Events are shared between watchers: the event
// and its objects are read-only.
type Event struct {
	storage.Event
	// InitialEventsEnd marks the Bookmark that ends the initial events of a watch with
	// SendInitialEvents (the API puts the "k8s.io/initial-events-end" annotation on it).
	InitialEventsEnd bool

	// cur and old are the tree entries of the new and the previous state, for events built
	// from entries (a packed cache's ring, a re-list's differences); unpackEvent decodes them.
	cur, old *entry

	memo memo
}

type memo struct {
	mu  sync.Mutex
	enc []*encoding
}

type encoding struct {
	format string
	once   sync.Once
	data   []byte
	err    error
}

// Encoded returns encode(e), calling encode at most once per format for the life of the
// event, so an event fanned out to many watchers is encoded once per output format. The
// format names everything the encoding depends on (media type, kind, metadata-only, ...).
// Safe for concurrent use; concurrent callers for one format wait for the first.
func (e *Event) Encoded(format string, encode func(*Event) ([]byte, error)) ([]byte, error) {
	e.memo.mu.Lock()
	var enc *encoding
	for _, x := range e.memo.enc {
		if x.format == format {
			enc = x
			break
		}
	}
	if enc == nil {
		enc = &encoding{format: format}
		e.memo.enc = append(e.memo.enc, enc)
	}
	e.memo.mu.Unlock()
	enc.once.Do(func() { enc.data, enc.err = encode(e) })
	return enc.data, enc.err
}

func errorEvent(err error) *Event {
	return &Event{Event: storage.Event{Type: storage.ErrorEvent, Err: err}}
}
