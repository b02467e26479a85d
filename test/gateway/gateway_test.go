package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// namespace makes a namespace (of tenant when not empty), deleted after the test.
func namespace(t *testing.T, name, tenant string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if tenant != "" {
		ns.Labels = map[string]string{v1alpha1.LabelTenant: tenant}
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// backend serves h on the host's address; the Service <name> (port 80, "http") and an
// EndpointSlice point at it.
func backend(t *testing.T, ns, name string, h http.HandlerFunc) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	port := int32(l.Addr().(*net.TCPAddr).Port)
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port)}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-test",
		Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "test.gateway"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// named answers its name.
func named(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "%s path=%s x-team=%s", name, r.URL.Path, r.Header.Get("X-Team"))
	}
}

func createRoute(t *testing.T, r *v1alpha1.Route) *v1alpha1.Route {
	t.Helper()
	out, err := xc.KubeosV1alpha1().Routes(r.Namespace).Create(context.Background(), r, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Route %s/%s: %v", r.Namespace, r.Name, err)
	}
	return out
}

func backends(bs ...v1alpha1.RouteBackend) []v1alpha1.RouteBackend { return bs }

func to(component string, weight int32) v1alpha1.RouteBackend {
	return v1alpha1.RouteBackend{Component: component, Port: 80, Weight: ptr.To(weight)}
}

var gwClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type answer struct {
	code int
	body string
	hdr  http.Header
}

// get is a request to the gateway's HTTP port with a Host header.
func get(host, path string, hdr ...string) (answer, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
	if err != nil {
		return answer{}, err
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := gwClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}, err
}

// waitFor polls the gateway until a request answers as ok says.
func waitFor(t *testing.T, host, path string, ok func(answer) bool) answer {
	t.Helper()
	var last answer
	servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		a, err := get(host, path)
		if err != nil {
			return err
		}
		last = a
		if !ok(a) {
			return fmt.Errorf("%s%s: %d %q", host, path, a.code, a.body)
		}
		return nil
	})
	return last
}

func is200(a answer) bool { return a.code == http.StatusOK }

func TestWeights(t *testing.T) {
	ns := namespace(t, "gw-weights", "")
	backend(t, ns, "blue", named("blue"))
	backend(t, ns, "green", named("green"))
	createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "split"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"split.gw.test"},
			Rules: []v1alpha1.RouteRule{{Backends: backends(to("blue", 3), to("green", 1))}}}})
	waitFor(t, "split.gw.test", "/", func(a answer) bool { return a.code == 200 && strings.HasPrefix(a.body, "green") })
	n := map[string]int{}
	const total = 400
	for range total {
		a, err := get("split.gw.test", "/")
		if err != nil || a.code != 200 {
			t.Fatalf("%v %d %q", err, a.code, a.body)
		}
		n[a.hdr.Get("X-Backend")]++
	}
	// 3:1 → 300 of 400 expected; the bounds are seven standard deviations wide.
	if n["blue"]+n["green"] != total || n["blue"] < 240 || n["blue"] > 360 {
		t.Fatalf("counts %v for weights blue 3, green 1", n)
	}
	t.Logf("counts %v", n)
	// The Route's metrics count what it answered.
	if got := counter(t, "kube_gateway_requests_total", map[string]string{"namespace": ns, "route": "split", "code": "2xx"}); got < total {
		t.Errorf("kube_gateway_requests_total{route=split,code=2xx} = %v, want ≥ %d", got, total)
	}
	if a, _ := get("nobody.gw.test", "/"); a.code != http.StatusNotFound {
		t.Errorf("unknown host: %d, want 404", a.code)
	}
	// The access log (buffered, written within 100 ms) has a line per request, with the
	// endpoint that answered.
	line := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=request component=gateway route=` + ns +
		`/split host=split\.gw\.test method=GET path=/ status=200 bytes=\d+ duration=[0-9.]+ms upstream=[0-9.]+:\d+ remote=127\.0\.0\.1:\d+$`)
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		if n := len(line.FindAll(b, -1)); n < total {
			return fmt.Errorf("%d access log lines of route %s/split, want ≥ %d", n, ns, total)
		}
		return nil
	})
}

func TestSlowBackendKeepsOtherRoutesServing(t *testing.T) {
	ns := namespace(t, "gw-slow", "")
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	backend(t, ns, "slow", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	backend(t, ns, "fast", named("fast"))
	createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"slow.gw.test"},
			Rules: []v1alpha1.RouteRule{{Backends: backends(to("slow", 1)), Timeout: &metav1.Duration{Duration: 3 * time.Second}}}}})
	createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fast"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"fast.gw.test"}, Rules: []v1alpha1.RouteRule{{Backends: backends(to("fast", 1))}}}})
	waitFor(t, "fast.gw.test", "/", is200)
	waitFor(t, "slow.gw.test", "/", func(a answer) bool { return a.code == http.StatusGatewayTimeout })
	// While a slow request is held by its backend, the other Route answers.
	for len(entered) > 0 {
		<-entered
	}
	done := make(chan answer, 1)
	go func() { a, _ := get("slow.gw.test", "/held"); done <- a }()
	select {
	case <-entered:
	case a := <-done:
		t.Fatalf("the slow request ended before its backend got it: %d", a.code)
	}
	if a, err := get("fast.gw.test", "/"); err != nil || a.code != 200 {
		t.Fatalf("fast Route while the slow one is held: %v %d", err, a.code)
	}
	if a := <-done; a.code != http.StatusGatewayTimeout {
		t.Fatalf("slow Route: %d, want 504", a.code)
	}
}

func TestRedirectRewriteAndHeaders(t *testing.T) {
	ns := namespace(t, "gw-filters", "")
	backend(t, ns, "app", named("app"))
	createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "filters"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"filters.gw.test", "*.filters.gw.test"}, Rules: []v1alpha1.RouteRule{
			{Matches: []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathPrefix, Value: "/old"}}},
				Filters: []v1alpha1.RouteFilter{{Type: v1alpha1.FilterRequestRedirect, RequestRedirect: &v1alpha1.RouteRedirect{
					Scheme: "https", Hostname: "new.gw.test", Path: "/moved", StatusCode: 301}}}},
			{Matches: []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathPrefix, Value: "/api"}}},
				Filters: []v1alpha1.RouteFilter{
					{Type: v1alpha1.FilterURLRewrite, URLRewrite: &v1alpha1.RouteURLRewrite{ReplacePrefixMatch: ptr.To("/v2")}},
					{Type: v1alpha1.FilterRequestHeaderModifier, RequestHeaderModifier: &v1alpha1.HeaderModifier{Set: []v1alpha1.HTTPHeader{{Name: "X-Team", Value: "shop"}}}},
					{Type: v1alpha1.FilterResponseHeaderModifier, ResponseHeaderModifier: &v1alpha1.HeaderModifier{
						Add: []v1alpha1.HTTPHeader{{Name: "X-Served-By", Value: "kube"}}, Remove: []string{"X-Backend"}}},
				},
				Backends: backends(to("app", 1))},
			{Backends: backends(to("app", 1))},
		}}})
	a := waitFor(t, "filters.gw.test", "/old/page?x=1", func(a answer) bool { return a.code == http.StatusMovedPermanently })
	if loc := a.hdr.Get("Location"); loc != "https://new.gw.test/moved?x=1" {
		t.Errorf("Location %q", loc)
	}
	a = waitFor(t, "filters.gw.test", "/api/items", is200)
	if a.body != "app path=/v2/items x-team=shop" || a.hdr.Get("X-Served-By") != "kube" || a.hdr.Get("X-Backend") != "" {
		t.Errorf("rewritten request: %q, headers %v", a.body, a.hdr)
	}
	// The wildcard hostname serves subdomains; the other paths reach the last rule unchanged.
	a = waitFor(t, "eu.filters.gw.test", "/apix", is200)
	if a.body != "app path=/apix x-team=" || a.hdr.Get("X-Backend") != "app" {
		t.Errorf("catch-all rule: %q %v", a.body, a.hdr)
	}
}

func TestReloadKeepsConnections(t *testing.T) {
	ns := namespace(t, "gw-reload", "")
	backend(t, ns, "v1", named("v1"))
	backend(t, ns, "v2", named("v2"))
	r := createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reload"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"reload.gw.test"}, Rules: []v1alpha1.RouteRule{{Backends: backends(to("v1", 1))}}}})
	waitFor(t, "reload.gw.test", "/", is200)
	// One keep-alive connection, reused across the change of the Route.
	tr := &http.Transport{Proxy: nil, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	conns := 0
	do := func() string {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if !i.Reused {
				conns++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+httpAddr+"/", nil)
		req.Host = "reload.gw.test"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request on the kept connection: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("X-Backend") + " " + strconv.Itoa(resp.StatusCode) + " " + string(b[:min(len(b), 2)])
	}
	if got := do(); !strings.HasPrefix(got, "v1 200") {
		t.Fatalf("before: %s", got)
	}
	patch := []byte(`{"spec":{"rules":[{"backends":[{"component":"v2","port":80}]}]}}`)
	if _, err := xc.KubeosV1alpha1().Routes(ns).Patch(context.Background(), r.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, time.Minute, 50*time.Millisecond, func() error {
		if got := do(); !strings.HasPrefix(got, "v2 200") {
			return errors.New("still " + got)
		}
		return nil
	})
	if conns != 1 {
		t.Fatalf("%d connections opened, want the one kept across the reload", conns)
	}
}

func TestTLSWithCertificate(t *testing.T) {
	ns := namespace(t, "gw-tls", "")
	ctx := ctxT(t)
	backend(t, ns, "secure", named("secure"))
	cert := &v1alpha1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-tls"},
		Spec: v1alpha1.CertificateSpec{DNSNames: []string{"secure.gw.test", "*.secure.gw.test"}}}
	if _, err := xc.KubeosV1alpha1().Certificates(ns).Create(ctx, cert, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ca []byte
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "shop-tls", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ca = s.Data["ca.crt"]
		return nil
	})
	// Hostnames the Certificate does not cover: 422.
	bad := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "uncovered"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"secure.gw.test", "other.gw.test"}, TLS: &v1alpha1.RouteTLS{Certificate: "shop-tls"},
			Rules: []v1alpha1.RouteRule{{Backends: backends(to("secure", 1))}}}}
	expectInvalid(t, bad, "other.gw.test")
	createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"secure.gw.test", "*.secure.gw.test"}, TLS: &v1alpha1.RouteTLS{Certificate: "shop-tls"},
			Rules: []v1alpha1.RouteRule{{Backends: backends(to("secure", 1))}}}})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA in the Certificate's Secret")
	}
	for _, host := range []string{"secure.gw.test", "a.secure.gw.test"} {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil,
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host},
			DialTLSContext:  nil,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, httpsAddr)
			}}}
		servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
			resp, err := c.Get("https://" + host + "/hello")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(b) != "secure path=/hello x-team=" {
				return fmt.Errorf("%d %q", resp.StatusCode, b)
			}
			if resp.TLS == nil || resp.TLS.PeerCertificates[0].VerifyHostname(host) != nil {
				return errors.New("the served certificate does not name " + host)
			}
			return nil
		})
	}
	// No certificate for an unknown name: the handshake fails.
	conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "nobody.gw.test", InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Fatal("a TLS handshake for a name no Route serves succeeded")
	}
}

// expectInvalid creates r and wants 422 with msg in it (retried while the admission cache
// has not seen the objects r refers to).
func expectInvalid(t *testing.T, r *v1alpha1.Route, msg string) {
	t.Helper()
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		_, err := xc.KubeosV1alpha1().Routes(r.Namespace).Create(context.Background(), r, metav1.CreateOptions{})
		switch {
		case err == nil:
			_ = xc.KubeosV1alpha1().Routes(r.Namespace).Delete(context.Background(), r.Name, metav1.DeleteOptions{})
			return fmt.Errorf("Route %s was accepted", r.Name)
		case !apierrors.IsInvalid(err):
			t.Fatalf("Route %s: %v, want 422", r.Name, err)
		case !strings.Contains(err.Error(), msg):
			t.Fatalf("Route %s: %v, want it to name %q", r.Name, err, msg)
		}
		return nil
	})
}

func TestAdmission(t *testing.T) {
	ctx := ctxT(t)
	// A port the Component does not expose.
	ns := namespace(t, "gw-admission", "")
	comp := &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.ComponentSpec{Image: "kube.local/busybox:1", Exposes: []v1alpha1.ComponentPort{{Name: "http", Port: 8080}}}}
	if _, err := xc.KubeosV1alpha1().Components(ns).Create(ctx, comp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectInvalid(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong-port"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"web.gw.test"},
			Rules: []v1alpha1.RouteRule{{Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 9999}}}}}}, "does not expose port 9999")
	r := createRoute(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "right-port"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"web.gw.test"},
			Rules: []v1alpha1.RouteRule{{Backends: []v1alpha1.RouteBackend{{Component: "web", PortName: "http"}}}}}})
	if deps := r.Spec.Rules[0].Backends[0].Component; deps != "web" {
		t.Fatal(deps)
	}
	// A bad regular expression.
	expectInvalid(t, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-regex"},
		Spec: v1alpha1.RouteSpec{Hostnames: []string{"re.gw.test"}, Rules: []v1alpha1.RouteRule{{
			Matches:  []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.MatchRegularExpression, Value: "/(a"}}},
			Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 8080}}}}}}, "spec.rules[0].matches[0].path.value")

	// Tenants: a's hostnames are limited by its Tenant's annotation; b may not claim a's.
	for _, name := range []string{"gwa", "gwb"} {
		ten := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TenantSpec{Environments: []string{"dev"}}}
		if name == "gwa" {
			ten.Annotations = map[string]string{"kubeos.dev/route-hostnames": "shop.gw.test, *.shop.gw.test"}
		}
		if _, err := xc.KubeosV1alpha1().Tenants().Create(ctx, ten, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = xc.KubeosV1alpha1().Tenants().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	// The Tenants' own namespaces (a Tenant deletes other namespaces labelled with it).
	nsA, nsB := "gwa-dev", "gwb-dev"
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		for _, n := range []string{nsA, nsB} {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	rt := func(ns, name string, hosts ...string) *v1alpha1.Route {
		return &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.RouteSpec{Hostnames: hosts, Rules: []v1alpha1.RouteRule{{Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 8080}}}}}}
	}
	expectInvalid(t, rt(nsA, "outside", "evil.gw.test"), "is not among tenant gwa's route hostnames")
	createRoute(t, rt(nsA, "shop", "shop.gw.test", "*.shop.gw.test"))
	expectInvalid(t, rt(nsB, "steal", "shop.gw.test"), "claimed by Route gwa-dev/shop of another tenant")
	expectInvalid(t, rt(nsB, "steal-sub", "admin.shop.gw.test"), "claimed by Route gwa-dev/shop of another tenant")
	createRoute(t, rt(nsB, "own", "b.gw.test"))
}

// counter reads one series of the gateway's metrics (0 when absent).
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
