package lifecycle

import (
	"context"
	"net/http"
)

// TraceHeader carries a reconcile's trace id (the trace_id of the events it publishes) on
// every API request the reconcile makes, so the API server's audit log can record it.
const TraceHeader = "X-Kube-Trace-Id"

type traceKey struct{}

// WithTraceID returns a context whose API requests carry id in [TraceHeader] (through a
// transport wrapped by [TraceTransport]).
func WithTraceID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// TraceIDFrom returns the trace id WithTraceID stored in ctx, or "".
func TraceIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}

// TraceTransport wraps rt so that a request whose context carries a trace id sends it in
// TraceHeader. It fits rest.Config.Wrap:
//
//	cfg.Wrap(lifecycle.TraceTransport)
func TraceTransport(rt http.RoundTripper) http.RoundTripper { return traceTransport{rt} }

type traceTransport struct{ next http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	id := TraceIDFrom(r.Context())
	if id == "" || r.Header.Get(TraceHeader) != "" {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not modify the caller's request
	r.Header.Set(TraceHeader, id)
	return t.next.RoundTrip(r)
}

// WrappedRoundTripper lets client-go see through the wrapper (for cancellation and
// debugging).
func (t traceTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
