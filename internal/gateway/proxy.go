package gateway

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// exchange is one request's state, allocated once: the status writer, the rule it matched,
// the outbound URL and body wrapper, and the 1xx forwarding hook.
type exchange struct {
	sw     statusWriter
	rule   *Rule
	rm     *routeMetrics
	target *Target
	start  uint64 // the round robin's first endpoint
	body   *replayBody
	addr   string // the endpoint that answered (for the access log)

	url   url.URL
	rb    replayBody
	trace httptrace.ClientTrace
	// xff and xfh back the X-Forwarded-For and -Host values set on the outbound request
	// (no slice allocated per request; nothing appends to them).
	xff, xfh [1]string
	// mu guards done: a 1xx answer arriving after the round trip gave up must not touch
	// the response's headers.
	mu   sync.Mutex
	done bool
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// ServeHTTP routes one request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ex := &exchange{sw: statusWriter{ResponseWriter: w}}
	sw := &ex.sw
	t := g.table.Load()
	m, ok := t.route(hostOnly(r.Host), r)
	if ok && !m.Rule.hasEndpoints() {
		var mp *Match
		if mp = g.awaitEndpoints(r, &m); mp != nil {
			m = *mp
		} else {
			ok = false
		}
	}
	if !ok {
		http.NotFound(sw, r)
		g.finish(r, ex, start, g.noRoute, RouteKey{})
		return
	}
	rule := m.Rule
	ex.rule, ex.rm = rule, rule.metrics.Load()
	if ex.rm == nil { // a table this gateway did not Swap in
		ex.rm = g.metrics.route(rule.Route)
	}
	defer g.finish(r, ex, start, ex.rm, rule.Route)
	for i := range rule.Filters {
		f := &rule.Filters[i]
		switch f.Type {
		case v1alpha1.FilterRequestHeaderModifier:
			modifyHeaders(r.Header, f.RequestHeaderModifier)
		case v1alpha1.FilterURLRewrite:
			if rw := f.URLRewrite; rw != nil {
				if rw.Hostname != "" {
					r.Host = rw.Hostname
				}
				if rw.ReplacePrefixMatch != nil && m.Prefix != "" {
					r.URL.Path = replacePrefix(r.URL.Path, m.Prefix, *rw.ReplacePrefixMatch)
					r.URL.RawPath = ""
				}
			}
		case v1alpha1.FilterRequestRedirect:
			if f.RequestRedirect == nil {
				continue
			}
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			loc, code := redirectLocation(r, scheme, localPort(r), f.RequestRedirect, m.Prefix)
			for _, pf := range rule.Filters[:i] { // the response modifiers listed before the redirect
				if pf.Type == v1alpha1.FilterResponseHeaderModifier {
					modifyHeaders(sw.Header(), pf.ResponseHeaderModifier)
				}
			}
			sw.Header().Set("Location", loc)
			sw.WriteHeader(code)
			return
		}
	}
	tg := pick(rule)
	switch {
	case tg == nil:
		http.Error(sw, "no backend", http.StatusInternalServerError)
		return
	case tg.Problem != "":
		http.Error(sw, tg.Problem, http.StatusInternalServerError)
		return
	case len(tg.Addrs) == 0:
		http.Error(sw, "no ready endpoint of "+tg.Service, http.StatusServiceUnavailable)
		return
	}
	ex.target = tg
	ctx := r.Context()
	if rule.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rule.Timeout)
		defer cancel()
	}
	if isUpgrade(r.Header) { // WebSocket, h2c: httputil's ReverseProxy does the switch
		g.upgrades.ServeHTTP(sw, r.WithContext(context.WithValue(ctx, exchangeKey{}, ex)))
		return
	}
	g.forward(ctx, sw, r, ex)
}

// forward is the proxy core for every request but protocol upgrades: it sends r to ex's
// target (r itself, its headers changed in place, is the outbound request: the handler
// owns it and reads nothing of it afterwards) and copies the answer to w. What it does to
// the exchange is what httputil.ReverseProxy with Rewrite and SetXForwarded does, without
// the request clone, the header copies and the per-request MIME parse: hop-by-hop headers
// removed both ways, X-Forwarded-For/Host/Proto replaced, unparsable query parameters
// dropped, no Go User-Agent added, 1xx answers passed on, a body of unknown length or an
// event stream flushed as it comes, trailers passed on, an upstream that fails mid-body
// aborts the client's connection.
func (g *Gateway) forward(ctx context.Context, w *statusWriter, r *http.Request, ex *exchange) {
	h := r.Header
	te := hasToken(h["Te"], "trailers")
	removeHopByHop(h)
	if te {
		h["Te"] = trailersValue
	}
	delete(h, "Forwarded")
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		ex.xff[0] = ip
		h["X-Forwarded-For"] = ex.xff[:]
	} else {
		delete(h, "X-Forwarded-For")
	}
	ex.xfh[0] = r.Host
	h["X-Forwarded-Host"] = ex.xfh[:]
	if r.TLS == nil {
		h["X-Forwarded-Proto"] = httpValue
	} else {
		h["X-Forwarded-Proto"] = httpsValue
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = emptyValue // the Transport adds Go's own otherwise
	}

	ex.trace.Got1xxResponse = ex.got1xx
	out := r.WithContext(httptrace.WithClientTrace(ctx, &ex.trace))
	ex.url = *r.URL
	ex.url.Scheme, ex.url.RawQuery = "http", cleanQuery(ex.url.RawQuery)
	addrs := ex.target.Addrs
	ex.start = ex.target.next.Add(1)
	ex.url.Host = addrs[ex.start%uint64(len(addrs))]
	out.URL, out.Close, out.RequestURI = &ex.url, false, ""
	if r.ContentLength == 0 {
		out.Body = nil // nothing to send; and a nil body lets the Transport retry a stale connection
	} else if r.Body != nil {
		// The Transport closes a request's body when it fails; the server's must stay open
		// (and a retry sends it again when nothing of it was read).
		ex.rb = replayBody{rc: r.Body}
		ex.body = &ex.rb
		out.Body = ex.body
	}

	resp, err := g.roundTrip(out, ex)
	ex.mu.Lock()
	ex.done = true
	ex.mu.Unlock()
	if err != nil {
		g.upstreamError(w, r, ex, err)
		return
	}
	if resp.StatusCode == http.StatusSwitchingProtocols { // none was asked for
		resp.Body.Close()
		g.upstreamError(w, r, ex, errors.New("gateway: the backend switched protocols unasked"))
		return
	}
	removeHopByHop(resp.Header)
	for _, m := range ex.rule.respMods {
		modifyHeaders(resp.Header, m)
	}
	dst := w.Header()
	for k, vv := range resp.Header {
		if old, ok := dst[k]; ok {
			dst[k] = append(old, vv...)
		} else {
			dst[k] = vv // the response is the gateway's alone: no copy
		}
	}
	if len(resp.Trailer) > 0 { // the Transport reads them at the body's end: announce them
		keys := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst.Add("Trailer", strings.Join(keys, ", "))
	}
	announced := len(resp.Trailer)
	w.WriteHeader(resp.StatusCode)
	if err := copyBody(w, resp, streaming(resp)); err != nil {
		resp.Body.Close()
		g.log.Debug("body copy", "host", r.Host, "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler) // the client must see the answer was cut short
	}
	resp.Body.Close() // now: it fills resp.Trailer
	if len(resp.Trailer) > 0 {
		w.flush() // chunked, so that the trailers can follow
		prefix := ""
		if len(resp.Trailer) != announced {
			prefix = http.TrailerPrefix
		}
		for k, vv := range resp.Trailer {
			for _, v := range vv {
				dst.Add(prefix+k, v)
			}
		}
	}
}

var (
	trailersValue = []string{"trailers"}
	httpValue     = []string{"http"}
	httpsValue    = []string{"https"}
	emptyValue    = []string{""}
)

// got1xx passes an informational answer (103 Early Hints, 100 Continue) on to the client.
func (ex *exchange) got1xx(code int, header textproto.MIMEHeader) error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.done {
		return nil
	}
	h := ex.sw.Header()
	for k, vv := range header {
		h[k] = append(h[k], vv...)
	}
	ex.sw.WriteHeader(code)
	clear(h) // a 1xx's headers are its own
	return nil
}

// hopHeaders are removed from both directions, with those a Connection header names
// (RFC 9110 7.6.1; Proxy-Connection as libcurl still sends it).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// hasToken reports whether a comma-separated header's values hold token (any case).
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), token) {
				return true
			}
		}
	}
	return false
}

// isUpgrade is whether a request asks to switch protocols (Connection: upgrade and an
// Upgrade header).
func isUpgrade(h http.Header) bool {
	return len(h["Upgrade"]) > 0 && hasToken(h["Connection"], "upgrade")
}

// cleanQuery drops the query parameters Go's URL parser refuses (a ';' separator, a bad
// escape), as httputil's ReverseProxy does: a backend must not read parameters the gateway
// did not see.
func cleanQuery(q string) string {
	if !strings.ContainsAny(q, ";%") {
		return q
	}
	v, err := url.ParseQuery(q)
	if err == nil {
		return q
	}
	return v.Encode()
}

// streaming is whether a response is copied with a flush after each piece: an event
// stream, or a body of unknown length.
func streaming(resp *http.Response) bool {
	if resp.ContentLength == -1 {
		return true
	}
	ct := resp.Header.Get("Content-Type")
	if len(ct) < len("text/event-stream") || !strings.EqualFold(ct[:len("text/event-stream")], "text/event-stream") {
		return false
	}
	rest := strings.TrimLeft(ct[len("text/event-stream"):], " \t")
	return rest == "" || rest[0] == ';'
}

// copyBody copies the answer's body to w (flushing after each piece when streaming):
// an error is the upstream's or the client's.
func copyBody(w *statusWriter, resp *http.Response, stream bool) error {
	if stream {
		w.flush() // the headers now, before the first event
	}
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if stream {
				w.flush()
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// roundTrip sends out to the endpoint forward chose and, when the connection cannot be
// made and the rule allows retries, to the next ones (round robin).
func (g *Gateway) roundTrip(out *http.Request, ex *exchange) (*http.Response, error) {
	if ex == nil || ex.target == nil || len(ex.target.Addrs) == 0 {
		return nil, errors.New("gateway: no endpoint")
	}
	addrs := ex.target.Addrs
	var lastErr error
	for i := 0; i <= ex.rule.Retries; i++ {
		req := out
		if i > 0 { // the first attempt goes where forward pointed it
			o, u := *out, *out.URL
			u.Host = addrs[(ex.start+uint64(i))%uint64(len(addrs))]
			o.URL = &u
			req = &o
		}
		resp, err := g.transport.RoundTrip(req)
		if err == nil {
			ex.addr = req.URL.Host
			return resp, nil
		}
		lastErr = err
		if !isDialError(err) {
			return nil, err
		}
		ex.rm.connect.Inc()
		if ex.body != nil && ex.body.read || out.Context().Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// upstreamError answers a failed upstream exchange: 504 past the rule's timeout, else 502.
func (g *Gateway) upstreamError(w http.ResponseWriter, r *http.Request, ex *exchange, err error) {
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
		if ex != nil {
			ex.rm.timeout.Inc()
		}
	case errors.Is(err, context.Canceled):
		code = 499 // the client went away (nginx's code; nobody reads it)
	case ex != nil && !isDialError(err):
		ex.rm.other.Inc()
	}
	g.log.Debug("upstream error", "host", r.Host, "path", r.URL.Path, "err", err)
	w.WriteHeader(code)
}

// replayBody lets a request be retried after a failed dial: the transport closes the body
// on error, which must not end it while nothing of it has been read.
type replayBody struct {
	rc   io.ReadCloser
	read bool
}

func (b *replayBody) Read(p []byte) (int, error) {
	b.read = true
	return b.rc.Read(p)
}

func (b *replayBody) Close() error { return nil }

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// noEndpointWait is how long a request whose rule has no ready endpoint waits for a table
// that gives it one before it is answered 503. A table is built from several informers'
// caches, which can be between two states for a moment (a canary's Services deleted
// before the Release's status says so; test/application saw a few 503s while stable pods
// were ready): the next table, milliseconds later, heals it, and a request held that long
// is better served than refused.
const noEndpointWait = time.Second

// hasEndpoints is whether the rule can send a request somewhere: a target with a ready
// endpoint, or one with a problem (answered 500 at once), or none at all.
func (rule *Rule) hasEndpoints() bool {
	if len(rule.Targets) == 0 {
		return true
	}
	for _, tg := range rule.Targets {
		if len(tg.Addrs) > 0 || tg.Problem != "" {
			return true
		}
	}
	return false
}

// awaitEndpoints waits, up to noEndpointWait or the request's end, for a table in which
// the request's rule has an endpoint, and returns the request's match in the last table
// seen (nil: none).
func (g *Gateway) awaitEndpoints(r *http.Request, m *Match) *Match {
	g.awaiting.Add(1)
	defer g.awaiting.Add(-1)
	timer := time.NewTimer(noEndpointWait)
	defer timer.Stop()
	cur := g.table.Load()
	for {
		swapped := *g.swapped.Load()
		if t := g.table.Load(); t != cur {
			cur = t
			if m = cur.Route(hostOnly(r.Host), r); m == nil || m.Rule.hasEndpoints() {
				return m
			}
			continue
		}
		select {
		case <-swapped:
		case <-timer.C:
			return m
		case <-r.Context().Done():
			return m
		}
	}
}

// pick chooses a rule's target by weight (nil: none).
func pick(rule *Rule) *Target {
	switch {
	case rule.total <= 0:
		return nil
	case len(rule.Targets) == 1:
		return rule.Targets[0]
	}
	n := rand.Int64N(rule.total)
	for _, tg := range rule.Targets {
		if n < tg.Weight {
			return tg
		}
		n -= tg.Weight
	}
	return rule.Targets[len(rule.Targets)-1]
}

func (g *Gateway) finish(r *http.Request, ex *exchange, start time.Time, rm *routeMetrics, route RouteKey) {
	now := time.Now()
	took := now.Sub(start)
	code := ex.sw.code
	if code == 0 {
		code = http.StatusOK
	}
	rm.codes[codeClass(code)].Inc()
	rm.duration.Observe(took.Seconds())
	if g.access != nil {
		e := entryFor(r, now, route, code, ex.sw.bytes, took, ex.addr)
		g.access.log(&e)
	}
}

func localPort(r *http.Request) int {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ta, ok := a.(*net.TCPAddr); ok {
			return ta.Port
		}
	}
	return 0
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) { // 103, 100 are not the answer
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// flush sends what is buffered to the client.
func (w *statusWriter) flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach Flush and the deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
