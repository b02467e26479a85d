package filters

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/audit"
)

// BenchmarkAuditMetadata is the audit filter's own cost per request at Metadata level (two
// events, RequestReceived and ResponseComplete, written to a rotated file) on a configmap
// create, against the same request without the filter.
func BenchmarkAuditMetadata(b *testing.B) {
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}}`
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		request.AuditFrom(r.Context()).SetObject("x", "bench", "4d3c0f2e-5f1b-4a8e-9a0e-7b6f8c1d2e3f", "42")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	})
	user := &request.User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}
	serve := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/bench/configmaps", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			ctx := request.WithUser(r.Context(), user)
			ctx = request.WithInfo(ctx, request.Parse(r))
			h.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
		}
	}
	b.Run("none", func(b *testing.B) { serve(b, inner) })
	b.Run("metadata", func(b *testing.B) {
		p, err := audit.ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"))
		if err != nil {
			b.Fatal(err)
		}
		l, err := audit.NewLog(p, audit.LogOptions{Path: filepath.Join(b.TempDir(), "audit.log"), MaxSizeMB: 100, MaxBackups: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		serve(b, withAudit(inner, l))
	})
}
