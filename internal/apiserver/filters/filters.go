package filters

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
	"kubeos.dev/kube/internal/audit"
)

// Authenticator finds the user of a request; ok is false when the request carries no
// credentials this authenticator understands. An error means credentials were presented
// and are invalid.
type Authenticator interface {
	Authenticate(r *http.Request) (u *request.User, ok bool, err error)
}

// Options configure the filter chain.
type Options struct {
	Authenticators []Authenticator
	// Authorizer, when set, decides every request after authentication and impersonation;
	// a denial is 403 Forbidden. nil allows every authenticated request.
	Authorizer Authorizer
	// MaxMutatingInFlight and MaxReadOnlyInFlight bound concurrent requests (watches are not
	// counted); beyond them requests get 429 with Retry-After. Defaults 200 and 400.
	MaxMutatingInFlight, MaxReadOnlyInFlight int
	Metrics                                  *Metrics
	Log                                      *slog.Logger
	// Audit, when set, logs requests as its policy says (see withAudit).
	Audit *audit.Log
	// FlowControl, when set, is API priority and fairness in place of the two in-flight
	// limits (see withPriorityAndFairness).
	FlowControl FlowControl
}

// Metrics are the request metrics on /metrics.
type Metrics struct {
	Requests    *prometheus.CounterVec
	Latency     *prometheus.HistogramVec
	InFlight    *prometheus.GaugeVec
	OpenWatches *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_apiserver_requests_total", Help: "API requests by verb, resource and HTTP code.",
		}, []string{"verb", "resource", "code"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kube_apiserver_request_duration_seconds", Help: "API request latency by verb and resource (watches excluded).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "resource"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kube_apiserver_inflight_requests", Help: "Requests being served, by kind (mutating, readOnly).",
		}, []string{"kind"}),
		OpenWatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kube_apiserver_open_watches", Help: "Watches being served, by resource.",
		}, []string{"resource"}),
	}
	reg.MustRegister(m.Requests, m.Latency, m.InFlight, m.OpenWatches)
	m.InFlight.WithLabelValues("mutating")
	m.InFlight.WithLabelValues("readOnly")
	return m
}

// Chain wraps h in every filter, outermost first: recovery, request info, metrics,
// authentication, audit, impersonation, priority and fairness, authorization (or, without
// priority and fairness, authorization then the in-flight limits), body limit.
func Chain(h http.Handler, o Options) http.Handler {
	if o.MaxMutatingInFlight == 0 {
		o.MaxMutatingInFlight = 200
	}
	if o.MaxReadOnlyInFlight == 0 {
		o.MaxReadOnlyInFlight = 400
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h = withBodyLimit(h)
	if o.FlowControl == nil {
		h = withInFlightLimit(h, o)
	}
	if o.Authorizer != nil {
		h = withAuthorization(h, o.Authorizer)
	}
	// Priority and fairness classifies the impersonated user, before authorization, as
	// kube-apiserver orders them.
	if o.FlowControl != nil {
		h = withPriorityAndFairness(h, o.FlowControl, o)
	}
	if o.Authorizer != nil {
		h = withImpersonation(h, o.Authorizer)
	}
	if o.Audit != nil {
		h = withAudit(h, o.Audit)
	}
	h = withAuthentication(h, o.Authenticators)
	if o.Metrics != nil {
		h = withMetrics(h, o.Metrics)
	}
	h = withRequestInfo(h)
	return withRecovery(h, o.Log)
}

// statusWriter records the response code. Unwrap lets http.ResponseController reach the
// underlying writer's Flush.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func withRecovery(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				if sw.code == 0 {
					rest.WriteStatus(sw, apierrors.NewInternalError(fmt.Errorf("the server hit an internal error serving this request")))
				}
			}
		}()
		h.ServeHTTP(sw, r)
	})
}

func withRequestInfo(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := request.Parse(r)
		if info.Verb != "watch" {
			growStack()
		}
		h.ServeHTTP(w, r.WithContext(request.WithInfo(r.Context(), info)))
	})
}

// growStack grows the calling goroutine's stack to 64 KiB in one step. The HTTP/2
// server runs every request on a new goroutine whose stack starts at a few KiB; a write
// (decoding, admission, validation, field management's recursive merges) then doubles it
// three or four times, and each doubling copies the stack and walks every frame on it:
// ~8 % of the server's CPU in a profile of creates. One frame this size makes the runtime
// grow the stack at once to fit it, while the stack is still shallow. Watches are left
// alone: a watch goroutine lives long and needs little.
//
//go:noinline
func growStack() {
	var buf [32 << 10]byte
	useStack(buf[:])
}

//go:noinline
func useStack([]byte) {}

func withMetrics(h http.Handler, m *Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := request.InfoFrom(r.Context())
		resource := ""
		if info.IsResourceRequest {
			resource = info.Resource
			if info.Subresource != "" {
				resource += "/" + info.Subresource
			}
		}
		verb, ok := metricVerbs[info.Verb]
		if !ok {
			verb = "OTHER" // any token is a method: keep the label set small
		}
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		h.ServeHTTP(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.Requests.WithLabelValues(verb, resource, codeLabel(code)).Inc()
		if info.Verb != "watch" {
			m.Latency.WithLabelValues(verb, resource).Observe(time.Since(start).Seconds())
		}
	})
}

// metricVerbs are the verb label values by request verb (upper-cased); other verbs and
// methods count as OTHER.
var metricVerbs = func() map[string]string {
	m := map[string]string{}
	for _, v := range []string{"GET", "LIST", "WATCH", "CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION", "POST", "PUT", "HEAD", "OPTIONS"} {
		m[strings.ToLower(v)] = v
	}
	return m
}()

// codeLabels are the code label values of the status codes below 600, formatted once.
var codeLabels = func() []string {
	l := make([]string, 600)
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func codeLabel(code int) string {
	if code >= 0 && code < len(codeLabels) {
		return codeLabels[code]
	}
	return strconv.Itoa(code)
}

// anonymousAllowed are the paths a request without credentials may reach.
func anonymousAllowed(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	for _, p := range []string{"/healthz/", "/livez/", "/readyz/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

func withAuthentication(h http.Handler, authns []Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lastErr error
		for _, a := range authns {
			u, ok, err := a.Authenticate(r)
			if err != nil {
				lastErr = err
				continue
			}
			if ok {
				r.Header.Del("Authorization")
				h.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), u)))
				return
			}
		}
		if anonymousAllowed(r.URL.Path) {
			h.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), &request.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}})))
			return
		}
		_ = lastErr // the reason stays in the server: clients learn only that they are not authenticated
		rest.WriteStatus(w, apierrors.NewUnauthorized("Unauthorized"))
	})
}

// longRunning says a request holds its connection for as long as the client wants, as
// upstream's long-running check: the connect subresources (exec, attach, port-forward, log
// streams, proxies). Like watches, they take no in-flight slot.
func longRunning(info *request.Info) bool {
	if !info.IsResourceRequest {
		return false
	}
	switch info.Subresource {
	case "attach", "exec", "log", "portforward", "proxy":
		return true
	}
	return false
}

func withInFlightLimit(h http.Handler, o Options) http.Handler {
	mutating := make(chan struct{}, o.MaxMutatingInFlight)
	readOnly := make(chan struct{}, o.MaxReadOnlyInFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := request.InfoFrom(r.Context())
		if info.Verb == "watch" || longRunning(info) || (!info.IsResourceRequest && anonymousAllowed(r.URL.Path)) {
			h.ServeHTTP(w, r)
			return
		}
		sem, kind := readOnly, "readOnly"
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			sem, kind = mutating, "mutating"
		}
		select {
		case sem <- struct{}{}:
		default:
			if privileged(r) {
				// As kube-apiserver: system:masters (the admin, loopback clients) always
				// get an answer.
				h.ServeHTTP(w, r)
				return
			}
			se := apierrors.NewTooManyRequests("too many requests, please try again later", 1)
			rest.WriteStatus(w, se)
			return
		}
		defer func() { <-sem }()
		if o.Metrics != nil {
			g := o.Metrics.InFlight.WithLabelValues(kind)
			g.Inc()
			defer g.Dec()
		}
		h.ServeHTTP(w, r)
	})
}

// privileged reports whether the request's user is in system:masters.
func privileged(r *http.Request) bool {
	u, ok := request.UserFrom(r.Context())
	return ok && slices.Contains(u.Groups, "system:masters")
}

func withBodyLimit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > rest.MaxBodyBytes {
			rest.WriteStatus(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", rest.MaxBodyBytes)))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, rest.MaxBodyBytes+1)
		h.ServeHTTP(w, r)
	})
}
