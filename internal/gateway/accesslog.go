package gateway

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Access log lines are logfmt in the shape of the agent's slog text log:
//
//	time=2026-12-02T01:02:03.456Z level=INFO msg=request component=gateway route=ns/name
//	host=shop.example method=GET path=/api status=200 bytes=64 duration=0.412ms
//	upstream=10.1.0.7:8080 remote=192.0.2.9:51234
//
// (one line each; values with spaces, quotes, '=' or non-ASCII bytes are quoted as Go
// strings, so a client cannot forge a line or a field). The request path only appends to
// a buffer; the buffer is written when it holds accessLogChunk bytes, when a request finds
// the last write accessLogEvery ago, and by Flush (Run calls it every accessLogEvery and
// when it ends).
const (
	accessLogChunk = 32 << 10
	accessLogEvery = 100 * time.Millisecond
)

// accessLog buffers the lines for one writer.
type accessLog struct {
	w io.Writer

	mu    sync.Mutex
	buf   []byte
	spare []byte
	last  time.Time // the last write

	wmu sync.Mutex // one write at a time, in order
}

func newAccessLog(w io.Writer) *accessLog {
	return &accessLog{w: w, buf: make([]byte, 0, 2*accessLogChunk), spare: make([]byte, 0, 2*accessLogChunk), last: time.Now()}
}

// accessEntry is what one line says.
type accessEntry struct {
	at       time.Time
	route    RouteKey
	host     string
	method   string
	path     string
	status   int
	bytes    int64
	took     time.Duration
	upstream string
	remote   string
}

// log appends e's line; it writes the buffer out when full or due.
func (l *accessLog) log(e *accessEntry) {
	l.mu.Lock()
	l.buf = appendAccessLine(l.buf, e)
	due := len(l.buf) >= accessLogChunk || e.at.Sub(l.last) >= accessLogEvery
	var out []byte
	if due {
		out = l.take(e.at)
	}
	l.mu.Unlock()
	if out != nil {
		l.write(out)
	}
}

// take swaps the buffer for the spare one (l.mu held); the caller writes what it returns.
func (l *accessLog) take(now time.Time) []byte {
	if len(l.buf) == 0 {
		return nil
	}
	out := l.buf
	if l.spare != nil {
		l.buf, l.spare = l.spare[:0], nil
	} else {
		l.buf = make([]byte, 0, 2*accessLogChunk)
	}
	l.last = now
	return out
}

// write writes out and hands the buffer back as the spare.
func (l *accessLog) write(out []byte) {
	l.wmu.Lock()
	_, _ = l.w.Write(out) // an access log that cannot be written is not worth failing requests for
	l.wmu.Unlock()
	l.mu.Lock()
	if l.spare == nil && cap(out) <= 4*accessLogChunk {
		l.spare = out[:0]
	}
	l.mu.Unlock()
}

// flush writes out what is buffered.
func (l *accessLog) flush() {
	l.mu.Lock()
	out := l.take(time.Now())
	l.mu.Unlock()
	if out != nil {
		l.write(out)
	}
}

func appendAccessLine(b []byte, e *accessEntry) []byte {
	b = append(b, "time="...)
	b = e.at.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, " level=INFO msg=request component=gateway route="...)
	if e.route.Name != "" { // object names: nothing to quote
		b = append(append(append(b, e.route.Namespace...), '/'), e.route.Name...)
	} else {
		b = append(b, `""`...)
	}
	b = appendField(b, " host=", e.host)
	b = appendField(b, " method=", e.method)
	b = appendField(b, " path=", e.path)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, " bytes="...)
	b = strconv.AppendInt(b, e.bytes, 10)
	b = append(b, " duration="...)
	b = strconv.AppendFloat(b, float64(e.took)/float64(time.Millisecond), 'f', 3, 64)
	b = append(b, "ms"...)
	b = appendField(b, " upstream=", e.upstream)
	b = appendField(b, " remote=", e.remote)
	return append(b, '\n')
}

func appendField(b []byte, key, v string) []byte { return appendValue(append(b, key...), v) }

// appendValue appends v bare when it is plain, else as a quoted Go string.
func appendValue(b []byte, v string) []byte {
	if v == "" {
		return append(b, `""`...)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f {
			return strconv.AppendQuote(b, v)
		}
	}
	return append(b, v...)
}

// entryFor is the access entry of a finished request.
func entryFor(r *http.Request, at time.Time, route RouteKey, status int, bytes int64, took time.Duration, upstream string) accessEntry {
	return accessEntry{at: at, route: route, host: r.Host, method: r.Method, path: r.URL.Path, status: status,
		bytes: bytes, took: took, upstream: upstream, remote: r.RemoteAddr}
}
