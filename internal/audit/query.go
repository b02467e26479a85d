package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Annotations the server adds to events about lifecycle-managed objects (see
// internal/server's annotateLifecycle); a Query matches on them.
const (
	AnnotationOperator = "lifecycle.kubeos.dev/operator"
	AnnotationPhase    = "lifecycle.kubeos.dev/phase"
)

// Query selects audit events. Zero fields match everything.
type Query struct {
	// UID is the object's UID (objectRef.uid).
	UID string
	// Operator is the acting operator (lifecycle.kubeos.dev/operator annotation).
	Operator string
	// Phase is the lifecycle phase the request left (lifecycle.kubeos.dev/phase).
	Phase string
	// User is the requesting user or the user it impersonated.
	User string
	// Since keeps events at or after it (by stage timestamp).
	Since time.Time
	// Namespace keeps events about objects in it ("" any).
	Namespace string
}

// Match reports whether ev passes q. Only the final stage of a request (ResponseComplete,
// ResponseStarted for long-running ones, Panic) matches, so each request counts once.
func (q Query) Match(ev *auditv1.Event) bool {
	if ev.Stage == auditv1.StageRequestReceived {
		return false
	}
	ref := ev.ObjectRef
	switch {
	case q.UID != "" && (ref == nil || string(ref.UID) != q.UID):
		return false
	case q.Namespace != "" && (ref == nil || ref.Namespace != q.Namespace):
		return false
	case q.Operator != "" && ev.Annotations[AnnotationOperator] != q.Operator:
		return false
	case q.Phase != "" && !strings.EqualFold(ev.Annotations[AnnotationPhase], q.Phase):
		return false
	case q.User != "" && ev.User.Username != q.User && (ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != q.User):
		return false
	case !q.Since.IsZero() && ev.StageTimestamp.Time.Before(q.Since):
		return false
	}
	return true
}

// Files lists the audit log at path and its rotated backups (lumberjack's
// name-<timestamp>.ext beside it), oldest first. A missing current file is not an error.
func Files(path string) ([]string, error) {
	ext := filepath.Ext(path)
	prefix := strings.TrimSuffix(path, ext) + "-"
	backups, err := filepath.Glob(globEscape(prefix) + "*" + globEscape(ext))
	if err != nil {
		return nil, err
	}
	sort.Strings(backups) // timestamps in the names sort in time order
	if _, err := os.Stat(path); err == nil {
		backups = append(backups, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return backups, nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

// Search reads files (oldest first, as Files lists them) from their ends, newest event
// first, for events matching q that allow accepts (the caller's authorization; nil accepts
// all). It returns the newest limit of them, oldest first, how many matches allow refused
// among the entries read, and whether more than limit matched. It stops at the first match
// past limit, or at the first event older than q.Since (less sinceSlack: lines are written
// roughly, not strictly, in stage-time order), so a query's cost is bounded by --since and
// the limit, not by the log's size. Lines that are not events (a write cut short by a crash)
// are skipped.
func Search(files []string, q Query, allow func(*auditv1.Event) bool, limit int) (out []auditv1.Event, hidden int, truncated bool, err error) {
	if limit <= 0 {
		limit = 500
	}
	var uid []byte
	if q.UID != "" {
		uid = []byte(q.UID)
	}
	visit := func(line []byte) error {
		if !q.Since.IsZero() {
			if t, ok := stageTime(line); ok && t.Before(q.Since.Add(-sinceSlack)) {
				return errDone
			}
		}
		if uid != nil && !bytes.Contains(line, uid) {
			return nil // cheap pre-filter before decoding
		}
		var ev auditv1.Event
		if json.Unmarshal(line, &ev) != nil || !q.Match(&ev) {
			return nil
		}
		if allow != nil && !allow(&ev) {
			hidden++
			return nil
		}
		if len(out) == limit {
			truncated = true
			return errDone
		}
		out = append(out, ev)
		return nil
	}
	for i := len(files) - 1; i >= 0; i-- {
		err := eachLineReverse(files[i], visit)
		if errors.Is(err, errDone) {
			break
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // rotated away while we listed
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("audit log %s: %w", files[i], err)
		}
	}
	slices.Reverse(out)
	return out, hidden, truncated, nil
}

// sinceSlack is how far before Since a search reads on: events are appended in about, not
// exactly, their stage time's order.
const sinceSlack = time.Minute

// errDone ends a search early.
var errDone = errors.New("search done")

// Reading backwards: the chunk size, and the longest line kept (longer ones are skipped).
const (
	reverseChunk = 256 << 10
	maxLine      = 16 << 20
)

// eachLineReverse calls fn with each non-empty line of the file at path, last line first,
// until fn returns an error (which it returns). fn must not keep line.
func eachLineReverse(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pos := st.Size()
	// tail is the end of a line whose start lies before pos; broken is set when it grew
	// past maxLine and was dropped (the rest of that line is skipped too).
	var tail []byte
	broken := false
	for pos > 0 {
		n := min(int64(reverseChunk), pos)
		pos -= n
		b := make([]byte, n, int(n)+len(tail))
		if _, err := f.ReadAt(b, pos); err != nil {
			return err
		}
		b = append(b, tail...)
		for {
			i := bytes.LastIndexByte(b, '\n')
			if i < 0 {
				break
			}
			line := b[i+1:]
			b = b[:i]
			if broken {
				broken = false
				continue
			}
			if len(line) > 0 {
				if err := fn(line); err != nil {
					return err
				}
			}
		}
		tail = b
		if len(tail) > maxLine {
			tail, broken = nil, true
		}
	}
	if len(tail) > 0 && !broken {
		return fn(tail)
	}
	return nil
}

// stageTime reads an encoded event's stageTimestamp without decoding the event (the last
// occurrence of the key: an embedded request or response object comes before it, and a
// string value cannot hold it unescaped).
func stageTime(line []byte) (time.Time, bool) {
	const key = `"stageTimestamp":"`
	i := bytes.LastIndex(line, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return t, err == nil
}
