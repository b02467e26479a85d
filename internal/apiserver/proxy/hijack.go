package proxy

import (
	"bufio"
	"net"
	"net/http"
)

// hijackable returns w as an http.Hijacker. The server's filters wrap the connection's
// writer in writers that record the status and only Unwrap to it; upstream's upgrade code
// (UpgradeAwareHandler, x/net/websocket) asserts http.Hijacker on the writer it is given.
// ok is false when no writer underneath can hijack (an HTTP/2 stream).
func hijackable(w http.ResponseWriter) (http.ResponseWriter, bool) {
	if _, ok := w.(http.Hijacker); ok {
		return w, true
	}
	for u := w; ; {
		uw, ok := u.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w, false
		}
		u = uw.Unwrap()
		if hj, ok := u.(http.Hijacker); ok {
			return &hijackWriter{ResponseWriter: w, hijacker: hj}, true
		}
	}
}

// hijackWriter writes through the outer writer (so the filters still see the status) and
// hijacks the connection underneath.
type hijackWriter struct {
	http.ResponseWriter
	hijacker http.Hijacker
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijacker.Hijack() }

func (w *hijackWriter) Flush() {
	http.NewResponseController(w.ResponseWriter).Flush() //nolint:errcheck // nothing to flush into is not an error here
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
