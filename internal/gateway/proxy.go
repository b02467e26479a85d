package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// exchange is one request's state, allocated once: the status writer, the rule it matched
// and what the transport needs, reached from the ReverseProxy's hooks through the request
// context.
type exchange struct {
	sw     statusWriter
	rule   *Rule
	rm     *routeMetrics
	target *Target
	start  uint64 // the round robin's first endpoint
	body   *replayBody
	addr   string // the endpoint that answered (for the access log)
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// newReverseProxy is the gateway's one ReverseProxy: the exchange in the request's context
// says where each request goes.
func (g *Gateway) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			if ex := exchangeOf(pr.In.Context()); ex != nil && len(ex.target.Addrs) > 0 {
				addrs := ex.target.Addrs
				ex.start = ex.target.next.Add(1)
				pr.Out.URL.Host = addrs[ex.start%uint64(len(addrs))]
				if ex.rule.Retries > 0 && pr.Out.Body != nil && pr.Out.Body != http.NoBody {
					ex.body = &replayBody{rc: pr.Out.Body}
					pr.Out.Body = ex.body
				}
			}
			pr.SetXForwarded()
		},
		Transport: &retryTransport{base: g.transport},
		ModifyResponse: func(resp *http.Response) error {
			if ex := exchangeOf(resp.Request.Context()); ex != nil {
				for _, m := range ex.rule.respMods {
					modifyHeaders(resp.Header, m)
				}
			}
			return nil
		},
		ErrorHandler: g.proxyError,
		ErrorLog:     slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		BufferPool:   bufferPool{},
	}
}

// proxyError answers a failed upstream exchange: 504 past the rule's timeout, else 502.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	ex := exchangeOf(r.Context())
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

// retryTransport sends a request to the endpoint Rewrite chose and, when the connection
// cannot be made and the rule allows retries, to the next ones (round robin).
type retryTransport struct{ base http.RoundTripper }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchangeOf(req.Context())
	if ex == nil || len(ex.target.Addrs) == 0 {
		return nil, errors.New("gateway: no endpoint")
	}
	addrs := ex.target.Addrs
	var lastErr error
	for i := 0; i <= ex.rule.Retries; i++ {
		out := req
		if i > 0 { // the first attempt goes where Rewrite pointed it
			o, u := *req, *req.URL
			u.Host = addrs[(ex.start+uint64(i))%uint64(len(addrs))]
			o.URL = &u
			out = &o
		}
		resp, err := t.base.RoundTrip(out)
		if err == nil {
			ex.addr = out.URL.Host
			return resp, nil
		}
		lastErr = err
		if !isDialError(err) {
			return nil, err
		}
		ex.rm.connect.Inc()
		if ex.body != nil && ex.body.read || req.Context().Err() != nil {
			break
		}
	}
	return nil, lastErr
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

// ServeHTTP routes one request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ex := &exchange{sw: statusWriter{ResponseWriter: w}}
	sw := &ex.sw
	m := g.table.Load().Route(hostOnly(r.Host), r)
	if m != nil && !m.Rule.hasEndpoints() {
		m = g.awaitEndpoints(r, m)
	}
	if m == nil {
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
	ctx := context.WithValue(r.Context(), exchangeKey{}, ex)
	if rule.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rule.Timeout)
		defer cancel()
	}
	g.proxy.ServeHTTP(sw, r.WithContext(ctx))
}

// pick chooses a rule's target by weight (nil: none).
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
// seen.
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
	if w.code == 0 {
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

// Unwrap lets http.ResponseController reach Flush and the deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
