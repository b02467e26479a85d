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

// attempt is what the transport needs of one proxied request.
type attempt struct {
	target   *Target
	retries  int
	respMods []*v1alpha1.HeaderModifier
	rm       *routeMetrics
	addr     string // the endpoint that answered (for the access log)
}

type attemptKey struct{}

// newReverseProxy is the shared ReverseProxy: the endpoint is chosen by the transport.
func (g *Gateway) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "endpoint" // replaced by the transport
			pr.SetXForwarded()
		},
		Transport: &retryTransport{base: g.transport},
		ModifyResponse: func(resp *http.Response) error {
			if a, ok := resp.Request.Context().Value(attemptKey{}).(*attempt); ok {
				for _, m := range a.respMods {
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
	a, _ := r.Context().Value(attemptKey{}).(*attempt)
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
		if a != nil {
			a.rm.timeout.Inc()
		}
	case errors.Is(err, context.Canceled):
		code = 499 // the client went away (nginx's code; nobody reads it)
	case a != nil && !isDialError(err):
		a.rm.other.Inc()
	}
	g.log.Debug("upstream error", "host", r.Host, "path", r.URL.Path, "err", err)
	w.WriteHeader(code)
}

// retryTransport sends a request to one of the target's endpoints (round robin) and, when
// the connection cannot be made and the rule allows retries, to the next one.
type retryTransport struct{ base http.RoundTripper }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, ok := req.Context().Value(attemptKey{}).(*attempt)
	if !ok || len(a.target.Addrs) == 0 {
		return nil, errors.New("gateway: no endpoint")
	}
	addrs := a.target.Addrs
	start := a.target.next.Add(1)
	var body *replayBody
	if req.Body != nil && req.Body != http.NoBody && a.retries > 0 {
		body = &replayBody{rc: req.Body}
	}
	var lastErr error
	for i := 0; i <= a.retries; i++ {
		addr := addrs[(start+uint64(i))%uint64(len(addrs))]
		out := *req
		u := *req.URL
		u.Host = addr
		out.URL = &u
		if body != nil {
			out.Body = body
		}
		resp, err := t.base.RoundTrip(&out)
		if err == nil {
			a.addr = addr
			return resp, nil
		}
		lastErr = err
		if !isDialError(err) {
			return nil, err
		}
		a.rm.connect.Inc()
		if body != nil && body.read || req.Context().Err() != nil {
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
	sw := &statusWriter{ResponseWriter: w}
	t := g.table.Load()
	host := hostOnly(r.Host)
	m := t.Route(host, r)
	if m == nil {
		http.NotFound(sw, r)
		g.finish(r, sw, start, g.metrics.route(RouteKey{}), RouteKey{}, nil)
		return
	}
	rule := m.Rule
	rm := g.metrics.route(rule.Route)
	var a *attempt
	defer func() { g.finish(r, sw, start, rm, rule.Route, a) }()
	var respMods []*v1alpha1.HeaderModifier
	for i := range rule.Filters {
		f := &rule.Filters[i]
		switch f.Type {
		case v1alpha1.FilterRequestHeaderModifier:
			modifyHeaders(r.Header, f.RequestHeaderModifier)
		case v1alpha1.FilterResponseHeaderModifier:
			respMods = append(respMods, f.ResponseHeaderModifier)
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
			for _, mod := range respMods {
				modifyHeaders(sw.Header(), mod)
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
	a = &attempt{target: tg, retries: rule.Retries, respMods: respMods, rm: rm}
	ctx := context.WithValue(r.Context(), attemptKey{}, a)
	if rule.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rule.Timeout)
		defer cancel()
	}
	g.proxy.ServeHTTP(sw, r.WithContext(ctx))
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

func (g *Gateway) finish(r *http.Request, sw *statusWriter, start time.Time, rm *routeMetrics, route RouteKey, a *attempt) {
	took := time.Since(start)
	code := sw.code
	if code == 0 {
		code = http.StatusOK
	}
	rm.codes[codeClass(code)].Inc()
	rm.duration.Observe(took.Seconds())
	if g.access.Enabled(r.Context(), slog.LevelInfo) {
		upstream := ""
		if a != nil {
			upstream = a.addr
		}
		g.access.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("route", route.String()), slog.String("host", r.Host), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Int("status", code), slog.Int64("bytes", sw.bytes),
			slog.Duration("duration", took), slog.String("upstream", upstream), slog.String("remote", r.RemoteAddr))
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
