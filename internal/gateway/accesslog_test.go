package gateway

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAccessLine(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 456_000_000, time.UTC)
	for _, c := range []struct {
		name string
		e    accessEntry
		want string
	}{
		{"plain", accessEntry{at: at, route: RouteKey{"shop", "web"}, host: "shop.test", method: "GET", path: "/api/x", status: 200,
			bytes: 64, took: 412 * time.Microsecond, upstream: "10.1.0.7:8080", remote: "192.0.2.9:51234"},
			`time=2026-12-02T01:02:03.456Z level=INFO msg=request component=gateway route=shop/web host=shop.test method=GET path=/api/x status=200 bytes=64 duration=0.412ms upstream=10.1.0.7:8080 remote=192.0.2.9:51234` + "\n"},
		{"no route, no upstream", accessEntry{at: at, host: "x", method: "GET", path: "/", status: 404, took: time.Millisecond},
			`time=2026-12-02T01:02:03.456Z level=INFO msg=request component=gateway route="" host=x method=GET path=/ status=404 bytes=0 duration=1.000ms upstream="" remote=""` + "\n"},
		// A client cannot start a line or a field of its own.
		{"hostile values quoted", accessEntry{at: at, route: RouteKey{"a", "b"}, host: "h\nstatus=500", method: "GET", path: "/a b\"c=d\\é",
			status: 200, remote: "r"},
			`time=2026-12-02T01:02:03.456Z level=INFO msg=request component=gateway route=a/b host="h\nstatus=500" method=GET path="/a b\"c=d\\é" status=200 bytes=0 duration=0.000ms upstream="" remote=r` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(appendAccessLine(nil, &c.e)); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// lockedBuffer counts the writes it gets.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.b.Write(p)
}

func (w *lockedBuffer) get() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String(), w.writes
}

func TestAccessLogBuffers(t *testing.T) {
	w := &lockedBuffer{}
	l := newAccessLog(w)
	at := l.last
	e := accessEntry{at: at, route: RouteKey{"a", "b"}, host: "h", method: "GET", path: "/", status: 200}
	l.log(&e)
	l.log(&e)
	if s, n := w.get(); n != 0 || s != "" {
		t.Fatalf("written at once: %d writes", n)
	}
	// A request past the interval writes everything buffered, itself included.
	e.at = at.Add(accessLogEvery)
	l.log(&e)
	if s, n := w.get(); n != 1 || strings.Count(s, "\n") != 3 {
		t.Fatalf("after the interval: %d writes, %d lines", n, strings.Count(s, "\n"))
	}
	// A full chunk is written without waiting.
	e.at = e.at.Add(time.Millisecond)
	for {
		l.log(&e)
		if _, n := w.get(); n == 2 {
			break
		}
	}
	if s, _ := w.get(); len(s) < accessLogChunk {
		t.Fatalf("a chunk of %d bytes written, want ≥ %d", len(s), accessLogChunk)
	}
	l.log(&e)
	l.flush()
	l.flush() // nothing left: no empty write
	s, n := w.get()
	if n != 3 || !strings.HasSuffix(s, "remote=\"\"\n") {
		t.Fatalf("flush: %d writes, tail %q", n, s[max(0, len(s)-20):])
	}
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if !strings.HasPrefix(line, "time=") || !strings.HasSuffix(line, `remote=""`) {
			t.Fatalf("line %d torn: %q", i, line)
		}
	}
}

func TestBuilderWait(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct {
		name       string
		took, ago  time.Duration // the last compilation's duration; how long ago it ended
		interval   time.Duration
		wantWaitMs int
	}{
		{"quiet: at once", 10 * ms, 5 * time.Second, 100 * ms, 0},
		{"just past the interval: at once", 10 * ms, 100 * ms, 100 * ms, 0},
		{"within the interval: the rest of it", 10 * ms, 30 * ms, 100 * ms, 70},
		{"right after: the whole interval", 10 * ms, 0, 100 * ms, 100},
		{"a slow compilation stretches the gap to twice its time", 80 * ms, 60 * ms, 100 * ms, 100},
		{"slow and long ago: at once", 80 * ms, 200 * ms, 100 * ms, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b builder
			b.built(t0, c.took)
			now := t0.Add(c.took + c.ago)
			if got := b.wait(now, c.interval); got != time.Duration(c.wantWaitMs)*ms {
				t.Errorf("wait %v, want %d ms", got, c.wantWaitMs)
			}
		})
	}
}
