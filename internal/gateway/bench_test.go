package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// benchTable is 1,000 Routes of two rules each (a PathPrefix+header rule and a catch-all).
func benchTable(n int) *Table {
	in := Input{Services: svcs("bench", "web")}
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		in.Routes = append(in.Routes, route("bench", name, i, []string{name + ".bench", "*." + name + ".wild"},
			to("web", prefix("/api"), header("X-Canary", "1")), to("web")))
	}
	return Compile(in)
}

func BenchmarkTableRoute(b *testing.B) {
	tb := benchTable(1000)
	req := httptest.NewRequest("GET", "http://a.r999.wild/api/items?x=1", nil)
	b.ReportAllocs()
	for b.Loop() {
		if tb.Route("a.r999.wild", req) == nil {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCompile1000(b *testing.B) {
	for b.Loop() {
		benchTable(1000)
	}
}

// BenchmarkServeHTTP is the gateway's handler on a request answered by a redirect rule
// (everything but the upstream exchange).
func BenchmarkServeHTTP(b *testing.B) {
	g, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Routes: []*v1alpha1.Route{route("bench", "r", 1, []string{"r.bench"}, v1alpha1.RouteRule{
		Filters: []v1alpha1.RouteFilter{{Type: v1alpha1.FilterRequestRedirect, RequestRedirect: &v1alpha1.RouteRedirect{Scheme: "https"}}}})}}
	g.Swap(Compile(in))
	req := httptest.NewRequest("GET", "http://r.bench/x", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		if w.Code != http.StatusFound {
			b.Fatal(w.Code)
		}
	}
}
