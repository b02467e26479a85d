package storage

import (
	"errors"
	"fmt"
)

// Sentinels callers branch on. Every error the store returns for one of these conditions
// wraps the sentinel (use errors.Is) and is an *Error (use errors.As for the details).
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: Create found the key taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: a UID or resourceVersion precondition did not hold.
	ErrConflict = errors.New("conflict")
	// ErrCompacted: the requested revision was compacted away (410 Gone at the API).
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision: the requested revision is newer than anything the store has seen.
	ErrFutureRevision = errors.New("revision not yet reached")
	// ErrTooLarge: the encoded object exceeds MaxValueSize.
	ErrTooLarge = errors.New("object too large")
	// ErrInvalidContinue: a continue token that this store did not issue, or for another prefix.
	ErrInvalidContinue = errors.New("invalid continue token")
	// ErrInvalidRevision: a resourceVersion that is not a revision number.
	ErrInvalidRevision = errors.New("invalid resource version")
	// ErrInvalidObject: an object the store cannot encode or decode.
	ErrInvalidObject = errors.New("invalid object")
)

// MaxValueSize is the largest encoded object the store accepts (etcd's own request limit).
const MaxValueSize = 1536 * 1024

// Error describes a failed store operation.
type Error struct {
	// Kind is one of the package's sentinels.
	Kind error
	// Key is the etcd key involved.
	Key string
	// Requested and Current are revisions: the one asked for and the store's (for
	// ErrCompacted, Current is the compacted revision).
	Requested, Current int64
	// Detail says more, in words.
	Detail string
	// Continue, for ErrCompacted from a List with a continue token, is a token that resumes
	// that list at the same key at the newest revision (an inconsistent list).
	Continue string
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Kind, ErrCompacted) && e.Current > 0:
		return fmt.Sprintf("too old resource version: %d (%d)", e.Requested, e.Current)
	case errors.Is(e.Kind, ErrCompacted):
		return fmt.Sprintf("too old resource version: %d", e.Requested)
	case errors.Is(e.Kind, ErrFutureRevision):
		return fmt.Sprintf("too large resource version: %d, current: %d", e.Requested, e.Current)
	}
	msg := e.Kind.Error()
	if e.Key != "" {
		msg = fmt.Sprintf("%s: %s", e.Key, msg)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, key, format string, args ...any) error {
	return &Error{Kind: kind, Key: key, Detail: fmt.Sprintf(format, args...)}
}
