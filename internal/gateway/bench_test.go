package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

// BenchmarkProxy is one request through the gateway to a real upstream over loopback
// (client, gateway and upstream in this process, one keep-alive connection each way),
// with the access log written to a file as the agent writes it; ns/op and allocs/op
// include the client's and the upstream's share, which the gateway does not change.
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("0123456789012345678901234567890123456789012345678901234567890123"))
	}))
	defer up.Close()
	f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	g, err := New(Options{AccessLog: f})
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	in := Input{Services: svcs("bench", "web"), EndpointSlices: []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(p))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}}}}}}
	for i := range 100 {
		name := fmt.Sprintf("r%d", i)
		in.Routes = append(in.Routes, route("bench", name, i, []string{name + ".bench"}, to("web", prefix("/api"), header("X-Canary", "1")), to("web")))
	}
	g.Swap(Compile(in))
	gs := httptest.NewServer(g)
	defer gs.Close()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	req, _ := http.NewRequest("GET", gs.URL+"/", nil)
	req.Host = "r99.bench"
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	g.Flush()
}

// processCPU is this process's user+system CPU time (the wall clock is the shared
// machine's; the CPU time is what the request path costs).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
