package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// backend answers "<name> <path> <header X-Test>" and echoes request headers as X-Echo-*.
func backend(t *testing.T, name string, delay chan struct{}) (host string, port int32) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if delay != nil {
			select {
			case <-delay:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Remove-Me", "x")
		fmt.Fprintf(w, "%s %s host=%s x-test=%s x-gone=%s", name, r.URL.Path, r.Host, r.Header.Get("X-Test"), r.Header.Get("X-Gone"))
	}))
	t.Cleanup(s.Close)
	h, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return h, int32(n)
}

// deadPort is a port nothing listens on.
func deadPort(t *testing.T) int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return int32(p)
}

func endpoints(ns, svc string, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	// One port per slice: a slice per address when the ports differ.
	h, p, _ := net.SplitHostPort(addrs[0])
	n, _ := strconv.Atoi(p)
	es.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(n))}}
	es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{h}}}
	return es
}

func TestServe(t *testing.T) {
	ns := "t"
	fastH, fastP := backend(t, "fast", nil)
	slowGate := make(chan struct{})
	t.Cleanup(func() { close(slowGate) })
	slowH, slowP := backend(t, "slow", slowGate)
	dead := deadPort(t)
	aliveH, aliveP := backend(t, "alive", nil)

	eps := []*discoveryv1.EndpointSlice{
		endpoints(ns, "fast", net.JoinHostPort(fastH, strconv.Itoa(int(fastP)))),
		endpoints(ns, "slow", net.JoinHostPort(slowH, strconv.Itoa(int(slowP)))),
	}
	// "flaky": one endpoint refuses connections, the other answers (two slices, two ports).
	flakyDead := endpoints(ns, "flaky", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(dead))))
	flakyDead.Name = "flaky-dead"
	flakyAlive := endpoints(ns, "flaky", net.JoinHostPort(aliveH, strconv.Itoa(int(aliveP))))
	eps = append(eps, flakyDead, flakyAlive)
	onlyDead := endpoints(ns, "deadsvc", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(dead))))
	eps = append(eps, onlyDead)
	services := svcs(ns, "fast", "slow", "flaky", "deadsvc", "noendpoints")
	for _, s := range services {
		s.Spec.Ports[0].Port = 80
		s.Spec.Ports[0].TargetPort.IntVal = 0
	}
	b := func(c string) []v1alpha1.RouteBackend { return []v1alpha1.RouteBackend{{Component: c, Port: 80}} }
	routes := []*v1alpha1.Route{
		route(ns, "fast", 1, []string{"fast.test"}, v1alpha1.RouteRule{Backends: b("fast"),
			Filters: []v1alpha1.RouteFilter{
				{Type: v1alpha1.FilterRequestHeaderModifier, RequestHeaderModifier: &v1alpha1.HeaderModifier{
					Set: []v1alpha1.HTTPHeader{{Name: "X-Test", Value: "set"}}, Remove: []string{"X-Gone"}}},
				{Type: v1alpha1.FilterResponseHeaderModifier, ResponseHeaderModifier: &v1alpha1.HeaderModifier{
					Add: []v1alpha1.HTTPHeader{{Name: "X-Added", Value: "yes"}}, Remove: []string{"X-Remove-Me"}}},
			}},
			v1alpha1.RouteRule{Matches: []v1alpha1.RouteMatch{prefix("/rewrite")}, Backends: b("fast"),
				Filters: []v1alpha1.RouteFilter{{Type: v1alpha1.FilterURLRewrite, URLRewrite: &v1alpha1.RouteURLRewrite{
					Hostname: "inner.test", ReplacePrefixMatch: ptr.To("/v2")}}}},
			v1alpha1.RouteRule{Matches: []v1alpha1.RouteMatch{prefix("/old")},
				Filters: []v1alpha1.RouteFilter{{Type: v1alpha1.FilterRequestRedirect, RequestRedirect: &v1alpha1.RouteRedirect{
					Scheme: "https", Hostname: "new.test", StatusCode: 301}}}}),
		route(ns, "slow", 1, []string{"slow.test"}, v1alpha1.RouteRule{Backends: b("slow"), Timeout: &metav1.Duration{Duration: 200 * time.Millisecond}}),
		route(ns, "flaky", 1, []string{"flaky.test"}, v1alpha1.RouteRule{Backends: b("flaky"), Retries: 1}),
		route(ns, "dead", 1, []string{"dead.test"}, v1alpha1.RouteRule{Backends: b("deadsvc")}),
		route(ns, "broken", 1, []string{"broken.test"}, v1alpha1.RouteRule{Backends: b("missing")},
			v1alpha1.RouteRule{Matches: []v1alpha1.RouteMatch{prefix("/none")}, Backends: b("noendpoints")}),
	}
	reg := prometheus.NewRegistry()
	g, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	g.Swap(Compile(Input{Routes: routes, Services: services, EndpointSlices: eps}))
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	do := func(host, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		r, _ := http.NewRequest("GET", srv.URL+path, nil)
		r.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatalf("%s%s: %v", host, path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}

	t.Run("header modifiers", func(t *testing.T) {
		resp, body := do("fast.test", "/x", "X-Gone", "here")
		if resp.StatusCode != 200 || body != "fast /x host=fast.test x-test=set x-gone=" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if resp.Header.Get("X-Added") != "yes" || resp.Header.Get("X-Remove-Me") != "" || resp.Header.Get("X-Backend") != "fast" {
			t.Fatalf("response headers %v", resp.Header)
		}
	})
	t.Run("url rewrite", func(t *testing.T) {
		resp, body := do("fast.test", "/rewrite/a")
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "fast /v2/a host=inner.test") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		resp, _ := do("fast.test", "/old/page?x=1")
		if resp.StatusCode != 301 || resp.Header.Get("Location") != "https://new.test/old/page?x=1" {
			t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("timeout answers 504 and other routes keep serving", func(t *testing.T) {
		done := make(chan int)
		go func() {
			resp, _ := do("slow.test", "/")
			done <- resp.StatusCode
		}()
		resp, _ := do("fast.test", "/while-slow")
		if resp.StatusCode != 200 {
			t.Errorf("fast route during a slow request: %d", resp.StatusCode)
		}
		if code := <-done; code != http.StatusGatewayTimeout {
			t.Errorf("slow route: %d, want 504", code)
		}
	})
	t.Run("retry on connect failure", func(t *testing.T) {
		for i := range 6 { // round robin starts on each endpoint in turn
			resp, body := do("flaky.test", "/")
			if resp.StatusCode != 200 || !strings.HasPrefix(body, "alive") {
				t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
			}
		}
		if n := testutil.ToFloat64(g.metrics.upstream.WithLabelValues(ns, "flaky", "connect")); n < 1 {
			t.Errorf("connect errors counted: %v", n)
		}
	})
	t.Run("error answers", func(t *testing.T) {
		for _, c := range []struct {
			host, path string
			code       int
		}{{"dead.test", "/", 502}, {"broken.test", "/", 500}, {"broken.test", "/none", 503}, {"nobody.test", "/", 404}} {
			if resp, body := do(c.host, c.path); resp.StatusCode != c.code {
				t.Errorf("%s%s: %d %q, want %d", c.host, c.path, resp.StatusCode, body, c.code)
			}
		}
	})
	t.Run("metrics per route", func(t *testing.T) {
		if n := testutil.ToFloat64(g.metrics.requests.WithLabelValues(ns, "fast", "2xx")); n < 3 {
			t.Errorf("fast 2xx: %v", n)
		}
		if n := testutil.ToFloat64(g.metrics.requests.WithLabelValues(ns, "slow", "5xx")); n != 1 {
			t.Errorf("slow 5xx: %v", n)
		}
		if n := testutil.ToFloat64(g.metrics.upstream.WithLabelValues(ns, "slow", "timeout")); n != 1 {
			t.Errorf("slow timeouts: %v", n)
		}
	})
}
