package lifecycle

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTraceTransport(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(TraceHeader)
	}))
	defer srv.Close()
	c := &http.Client{Transport: TraceTransport(http.DefaultTransport)}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		set  string // a header the caller set itself
		want string
	}{
		{"no trace", context.Background(), "", ""},
		{"trace from the context", WithTraceID(context.Background(), "abc123"), "", "abc123"},
		{"caller's header wins", WithTraceID(context.Background(), "abc123"), "mine", "mine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(tc.ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.set != "" {
				req.Header.Set(TraceHeader, tc.set)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if h := <-got; h != tc.want {
				t.Fatalf("%s = %q, want %q", TraceHeader, h, tc.want)
			}
			if tc.set == "" && req.Header.Get(TraceHeader) != "" {
				t.Fatal("the transport modified the caller's request")
			}
		})
	}
}
