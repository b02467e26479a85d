package gateway

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// The fixtures: a Route's rules each send to one backend Component ("v1", "v2", "v3");
// which rule a request reaches is read from the target's Service name.

func route(ns, name string, created int, hosts []string, rules ...v1alpha1.RouteRule) *v1alpha1.Route {
	return &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec: v1alpha1.RouteSpec{Hostnames: hosts, Rules: rules}}
}

func to(backend string, ms ...v1alpha1.RouteMatch) v1alpha1.RouteRule {
	return v1alpha1.RouteRule{Matches: ms, Backends: []v1alpha1.RouteBackend{{Component: backend, Port: 8080}}}
}

func exact(p string) v1alpha1.RouteMatch {
	return v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathExact, Value: p}}
}

func prefix(p string) v1alpha1.RouteMatch {
	return v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathPrefix, Value: p}}
}

func regex(p string) v1alpha1.RouteMatch {
	return v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.MatchRegularExpression, Value: p}}
}

func header(n, v string) v1alpha1.RouteMatch {
	return v1alpha1.RouteMatch{Headers: []v1alpha1.ValueMatch{{Name: n, Value: v}}}
}

func service(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: port}}}}
}

func slice(ns, svc string, port int32, ready bool, addrs ...string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}}}
}

func svcs(ns string, names ...string) []*corev1.Service {
	var out []*corev1.Service
	for _, n := range names {
		out = append(out, service(ns, n, 8080))
	}
	return out
}

type req struct {
	host, method, path string
	headers            map[string]string
	want               string // the Service reached ("" → 404)
}

func routeOf(t *testing.T, tb *Table, r req) string {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	hr := httptest.NewRequest(method, "http://"+r.host+r.path, nil)
	for k, v := range r.headers {
		hr.Header.Set(k, v)
	}
	m := tb.Route(r.host, hr)
	if m == nil {
		return ""
	}
	if len(m.Rule.Targets) == 0 {
		return "(no target)"
	}
	return m.Rule.Targets[0].Service
}

func TestPrecedence(t *testing.T) {
	ns := "infra"
	cases := []struct {
		name   string
		routes []*v1alpha1.Route
		reqs   []req
	}{{
		// conformance: HTTPRoutePathMatchOrder
		name: "path match order",
		routes: []*v1alpha1.Route{route(ns, "path-matching-order", 1, []string{"example.com"},
			to("v1", exact("/match")), to("v2", exact("/match/exact")), to("v3", exact("/match/exact/one")),
			to("v3", prefix("/match/")), to("v1", prefix("/match/prefix/")), to("v2", prefix("/match/prefix/one")))},
		reqs: []req{
			{path: "/match/exact/one", want: "infra/v3"}, {path: "/match/exact", want: "infra/v2"}, {path: "/match", want: "infra/v1"},
			{path: "/match/prefix/one/any", want: "infra/v2"}, {path: "/match/prefix/any", want: "infra/v1"}, {path: "/match/any", want: "infra/v3"},
			{path: "/matchany", want: ""},
		},
	}, {
		// conformance: HTTPRouteMatchingAcrossRoutes
		name: "matching across routes",
		routes: []*v1alpha1.Route{
			route(ns, "matching-part1", 1, []string{"example.com", "example.net"}, to("v1", prefix("/"), header("version", "one"))),
			route(ns, "matching-part2", 2, []string{"example.com"}, to("v2", prefix("/v2"), header("version", "two"))),
		},
		reqs: []req{
			{host: "example.com", path: "/", want: "infra/v1"},
			{host: "example.com", path: "/example", want: "infra/v1"},
			{host: "example.net", path: "/example", want: "infra/v1"},
			{host: "example.com", path: "/example", headers: map[string]string{"Version": "one"}, want: "infra/v1"},
			{host: "example.com", path: "/v2", want: "infra/v2"},
			{host: "example.net", path: "/v2", want: "infra/v1"},
			{host: "example.com", path: "/v2/example", want: "infra/v2"},
			{host: "example.com", path: "/", headers: map[string]string{"Version": "two"}, want: "infra/v2"},
			{host: "example.org", path: "/", want: ""},
		},
	}, {
		// conformance: HTTPRouteHeaderMatching (more headers win; header names case-insensitive)
		name: "headers",
		routes: []*v1alpha1.Route{route(ns, "header", 1, []string{"example.com"},
			to("v1", header("version", "one")), to("v2", header("version", "two")),
			to("v1", v1alpha1.RouteMatch{Headers: []v1alpha1.ValueMatch{{Name: "version", Value: "two"}, {Name: "color", Value: "orange"}}}),
			to("v2", v1alpha1.RouteMatch{Headers: []v1alpha1.ValueMatch{{Name: "color", Value: "blue"}}}),
			to("v3", v1alpha1.RouteMatch{Headers: []v1alpha1.ValueMatch{{Name: "color", Type: v1alpha1.MatchRegularExpression, Value: "gr[ae]y"}}}))},
		reqs: []req{
			{headers: map[string]string{"Version": "one"}, want: "infra/v1"},
			{headers: map[string]string{"version": "two"}, want: "infra/v2"},
			{headers: map[string]string{"Version": "two", "Color": "orange"}, want: "infra/v1"},
			{headers: map[string]string{"Color": "blue"}, want: "infra/v2"},
			{headers: map[string]string{"Color": "grey"}, want: "infra/v3"},
			{headers: map[string]string{"Color": "greyish"}, want: ""},
			{headers: map[string]string{"Color": "red"}, want: ""},
			{want: ""},
		},
	}, {
		// conformance: HTTPRouteMethodMatching (a method beats a longer-lived, broader match)
		name: "method and query",
		routes: []*v1alpha1.Route{route(ns, "method", 1, []string{"example.com"},
			to("v1", v1alpha1.RouteMatch{Method: "POST"}), to("v2", v1alpha1.RouteMatch{Method: "GET"}),
			to("v3", v1alpha1.RouteMatch{QueryParams: []v1alpha1.ValueMatch{{Name: "animal", Value: "whale"}}}))},
		reqs: []req{
			{method: "POST", want: "infra/v1"}, {method: "GET", want: "infra/v2"}, {method: "GET", path: "/?animal=whale", want: "infra/v2"},
			{method: "PUT", path: "/?animal=whale", want: "infra/v3"}, {method: "PUT", path: "/?animal=dolphin", want: ""},
		},
	}, {
		name: "exact beats regex beats prefix",
		routes: []*v1alpha1.Route{route(ns, "r", 1, []string{"example.com"},
			to("v3", prefix("/api/v1/users")), to("v2", regex("/api/v[0-9]+/.*")), to("v1", exact("/api/v1/users")))},
		reqs: []req{{path: "/api/v1/users", want: "infra/v1"}, {path: "/api/v1/users/7", want: "infra/v2"}, {path: "/api/vx/users/7", want: ""}},
	}, {
		name: "oldest route, then namespace/name, on a tie",
		routes: []*v1alpha1.Route{
			route(ns, "b-newer", 5, []string{"example.com"}, to("v1", prefix("/"))),
			route(ns, "c-old", 1, []string{"example.com"}, to("v2", prefix("/"))),
			route(ns, "a-old", 1, []string{"example.com"}, to("v3", prefix("/"))),
		},
		reqs: []req{{path: "/", want: "infra/v3"}},
	}, {
		name: "exact hostname beats wildcards, the longest wildcard wins, a wildcard covers several labels",
		routes: []*v1alpha1.Route{
			route(ns, "exact", 1, []string{"foo.example.com"}, to("v1", prefix("/only"))),
			route(ns, "wild", 1, []string{"*.example.com"}, to("v2")),
			route(ns, "wilder", 1, []string{"*.bar.example.com"}, to("v3")),
		},
		reqs: []req{
			{host: "foo.example.com", path: "/only", want: "infra/v1"},
			{host: "foo.example.com", path: "/other", want: ""}, // the exact host's rules only (as Envoy's virtual hosts)
			{host: "FOO.example.com.", path: "/only", want: "infra/v1"},
			{host: "x.example.com", want: "infra/v2"},
			{host: "a.b.example.com", want: "infra/v2"},
			{host: "a.bar.example.com", want: "infra/v3"},
			{host: "example.com", want: ""},
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := Compile(Input{Routes: c.routes, Services: svcs(ns, "v1", "v2", "v3")})
			if len(tb.Problems) > 0 {
				t.Fatalf("problems: %v", tb.Problems)
			}
			for _, r := range c.reqs {
				if r.host == "" {
					r.host = "example.com"
				}
				if r.path == "" {
					r.path = "/"
				}
				if got := routeOf(t, tb, r); got != r.want {
					t.Errorf("%s %s%s %v: reached %q, want %q", r.method, r.host, r.path, r.headers, got, r.want)
				}
			}
		})
	}
}

func TestNotAcceptedHostnameNotServed(t *testing.T) {
	r := route("ns", "r", 1, []string{"ok.test", "refused.test"}, to("v1"))
	r.Status.Hostnames = []v1alpha1.RouteHostnameStatus{{Hostname: "refused.test",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners"}}}}
	tb := Compile(Input{Routes: []*v1alpha1.Route{r}, Services: svcs("ns", "v1")})
	if got := routeOf(t, tb, req{host: "ok.test", path: "/"}); got != "ns/v1" {
		t.Errorf("ok.test: %q", got)
	}
	if got := routeOf(t, tb, req{host: "refused.test", path: "/"}); got != "" {
		t.Errorf("refused.test reached %q, want 404", got)
	}
}

func TestCompileProblems(t *testing.T) {
	tb := Compile(Input{Routes: []*v1alpha1.Route{route("ns", "bad", 1, []string{"a.test"}, to("v1", regex("(")), to("v1", prefix("nope")))}})
	if len(tb.Problems) != 2 {
		t.Fatalf("problems %v, want two", tb.Problems)
	}
}

func TestBackendsResolve(t *testing.T) {
	ns := "shop"
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.ReleaseSpec{Component: "web"}}
	rel.Status.CanaryWeight = ptr.To[int32](20)
	r := route(ns, "r", 1, []string{"shop.test"}, v1alpha1.RouteRule{Backends: []v1alpha1.RouteBackend{
		{Component: "web", Port: 8080, Weight: ptr.To[int32](3)}, {Component: "api", PortName: "http"}, {Component: "gone", Port: 1},
		{Component: "off", Port: 8080, Weight: ptr.To[int32](0)}}})
	in := Input{Routes: []*v1alpha1.Route{r}, Services: svcs(ns, "web", "web-canary", "web-stable", "api"),
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice(ns, "web-canary", 9000, true, "10.0.0.1"), slice(ns, "web-stable", 9000, true, "10.0.0.2", "10.0.0.3"),
			slice(ns, "api", 7000, false, "10.0.0.9"),
		},
		Releases: []*v1alpha1.Release{rel}}
	tb := Compile(in)
	m := tb.Route("shop.test", httptest.NewRequest("GET", "http://shop.test/", nil))
	if m == nil {
		t.Fatal("no match")
	}
	got := map[string]string{}
	for _, tg := range m.Rule.Targets {
		got[tg.Service] = strconv.FormatInt(tg.Weight, 10) + " " + tg.Problem + " " + strconv.Itoa(len(tg.Addrs))
	}
	want := map[string]string{
		"shop/web-canary": "60  1", // 3 × 20
		"shop/web-stable": "240  2",
		"shop/api":        "100  0", // not ready
		"shop/gone":       "100 Service shop/gone not found 0",
	}
	if len(got) != len(want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	// A canary with no ready pod yet gives its share to stable (no 503s for 20 %), and with
	// neither track ready the Service web serves.
	in.EndpointSlices = []*discoveryv1.EndpointSlice{slice(ns, "web-canary", 9000, false, "10.0.0.1"),
		slice(ns, "web-stable", 9000, true, "10.0.0.2"), slice(ns, "web", 9000, true, "10.0.0.5")}
	m = Compile(in).Route("shop.test", httptest.NewRequest("GET", "http://shop.test/", nil))
	if tg := m.Rule.Targets[0]; tg.Service != "shop/web-stable" || tg.Weight != 300 || len(tg.Addrs) != 1 {
		t.Errorf("canary not ready: first target %+v", tg)
	}
	in.EndpointSlices = []*discoveryv1.EndpointSlice{slice(ns, "web", 9000, true, "10.0.0.5")}
	m = Compile(in).Route("shop.test", httptest.NewRequest("GET", "http://shop.test/", nil))
	if tg := m.Rule.Targets[0]; tg.Service != "shop/web" || len(tg.Addrs) != 1 {
		t.Errorf("no track ready: first target %+v", tg)
	}
	// Without the canary Service, the Release's weight is not applied.
	in.Services = svcs(ns, "web", "web-stable")
	in.EndpointSlices = []*discoveryv1.EndpointSlice{slice(ns, "web", 9000, true, "10.0.0.5")}
	m = Compile(in).Route("shop.test", httptest.NewRequest("GET", "http://shop.test/", nil))
	if tg := m.Rule.Targets[0]; tg.Service != "shop/web" || len(tg.Addrs) != 1 || tg.Addrs[0] != "10.0.0.5:9000" {
		t.Errorf("without canary: %+v", tg)
	}
}

func TestPickWeights(t *testing.T) {
	rule := &Rule{Targets: []*Target{{Service: "a", Weight: 80}, {Service: "b", Weight: 20}, {Service: "c", Weight: 0}}, total: 100}
	n := map[string]int{}
	const draws = 100000
	for range draws {
		n[pick(rule).Service]++
	}
	if n["c"] != 0 || n["a"] < draws*75/100 || n["a"] > draws*85/100 {
		t.Fatalf("draws %v for weights 80/20/0", n)
	}
}

func TestReplacePrefix(t *testing.T) {
	// conformance: HTTPRouteRewritePath
	for _, c := range []struct{ path, prefix, repl, want string }{
		{"/prefix/one/two", "/prefix/one", "/one", "/one/two"},
		{"/strip-prefix/three", "/strip-prefix", "/", "/three"},
		{"/strip-prefix", "/strip-prefix", "/", "/"},
		{"/prefix/rewrite-path-and-modify-headers/one", "/prefix/rewrite-path-and-modify-headers", "/prefix", "/prefix/one"},
		{"/a/b", "/", "/x", "/x/a/b"},
	} {
		if got := replacePrefix(c.path, c.prefix, c.repl); got != c.want {
			t.Errorf("replacePrefix(%q, %q, %q) = %q, want %q", c.path, c.prefix, c.repl, got, c.want)
		}
	}
}

func TestRedirectLocation(t *testing.T) {
	// conformance: HTTPRouteRedirectPortAndScheme, HTTPRouteRedirectHostAndStatus
	for _, c := range []struct {
		name         string
		scheme       string
		listenerPort int
		rd           v1alpha1.RouteRedirect
		want         string
		code         int
	}{
		{"scheme to https drops 443", "http", 8080, v1alpha1.RouteRedirect{Scheme: "https"}, "https://example.org/p?q=1", 302},
		{"https with a port", "http", 80, v1alpha1.RouteRedirect{Scheme: "https", Port: ptr.To[int32](8443)}, "https://example.org:8443/p?q=1", 302},
		{"listener port kept", "http", 8080, v1alpha1.RouteRedirect{Hostname: "other.org"}, "http://other.org:8080/p?q=1", 302},
		{"port 80 on http dropped", "http", 8080, v1alpha1.RouteRedirect{Port: ptr.To[int32](80)}, "http://example.org/p?q=1", 302},
		{"path and 301", "http", 80, v1alpha1.RouteRedirect{Path: "/new", StatusCode: 301}, "http://example.org/new?q=1", 301},
	} {
		r := httptest.NewRequest("GET", "http://example.org:1234/p?q=1", nil)
		got, code := redirectLocation(r, c.scheme, c.listenerPort, &c.rd, "")
		if got != c.want || code != c.code {
			t.Errorf("%s: %s %d, want %s %d", c.name, got, code, c.want, c.code)
		}
	}
}
