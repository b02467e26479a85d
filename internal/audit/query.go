package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Search scans files (oldest first) for events matching q that allow accepts (the caller's
// authorization; nil accepts all). It returns the newest limit of them, oldest first, how many
// matches allow refused, and whether more than limit matched. Lines that are not events (a
// write cut short by a crash) are skipped.
func Search(files []string, q Query, allow func(*auditv1.Event) bool, limit int) (out []auditv1.Event, hidden int, truncated bool, err error) {
	if limit <= 0 {
		limit = 500
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // rotated away while we listed
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("audit log: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if q.UID != "" && !strings.Contains(string(line), q.UID) {
				continue // cheap pre-filter before decoding
			}
			var ev auditv1.Event
			if json.Unmarshal(line, &ev) != nil || !q.Match(&ev) {
				continue
			}
			if allow != nil && !allow(&ev) {
				hidden++
				continue
			}
			out = append(out, ev)
			if len(out) > limit {
				out = out[1:]
				truncated = true
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, 0, false, fmt.Errorf("audit log %s: %w", f, err)
		}
	}
	return out, hidden, truncated, nil
}
