package dashboard

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// inProcessHost is the host of the clients the dashboard builds: requests never leave the
// process, the transport hands them to the API handler chain.
const inProcessHost = "http://kube-dashboard.in-process"

// credential is what the browser proved: a bearer token from the session, or the TLS
// connection state with the client certificate it presented.
type credential struct {
	token string
	tls   *tls.ConnectionState
	// remote is the browser's address, recorded by the audit log as the source.
	remote string
}

// restConfig is a client configuration that authenticates as the browser's user: every
// request goes through api (authentication, impersonation, flow control, authorization,
// audit) exactly as if the browser had sent it.
func restConfig(api http.Handler, c credential) *rest.Config {
	return &rest.Config{
		Host:      inProcessHost,
		Transport: &inProcess{api: api, cred: c},
		QPS:       -1,
		UserAgent: "kube-dashboard",
	}
}

// inProcess is an http.RoundTripper serving requests with an http.Handler. The response
// body streams (watches work): the handler runs in its own goroutine writing into a pipe,
// and RoundTrip returns as soon as the status line is written.
type inProcess struct {
	api  http.Handler
	cred credential
}

var _ http.RoundTripper = (*inProcess)(nil)

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	r.Host = req.URL.Host
	r.RemoteAddr = t.cred.remote
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0"
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.Header.Del("Authorization")
	if t.cred.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.cred.token)
	}
	r.TLS = t.cred.tls
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				_ = pw.CloseWithError(fmt.Errorf("in-process API handler panicked: %v", p))
				w.writeHeader(http.StatusInternalServerError)
				return
			}
			w.writeHeader(http.StatusOK) // a handler that wrote nothing
			_ = pw.Close()
		}()
		t.api.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the http.ResponseWriter of an in-process request.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	code   int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational: nothing to pass on
	}
	w.writeHeader(code)
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	n, err := w.pw.Write(b)
	if errors.Is(err, io.ErrClosedPipe) {
		return n, http.ErrAbortHandler
	}
	return n, err
}

// Flush is a no-op: every Write reaches the reader at once.
func (w *pipeWriter) Flush() { w.writeHeader(http.StatusOK) }
