package gateway

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestNoEndpointWaitsForTheNextTable: a request whose rule has no ready endpoint is held
// until a table gives it one (then answered by it), or answered 503 after noEndpointWait.
func TestNoEndpointWaitsForTheNextTable(t *testing.T) {
	ns := "t"
	h, p := backend(t, "late", nil)
	services := svcs(ns, "late")
	services[0].Spec.Ports[0].Port = 80
	services[0].Spec.Ports[0].TargetPort.IntVal = 0
	routes := []*v1alpha1.Route{route(ns, "late", 1, []string{"late.test"},
		v1alpha1.RouteRule{Backends: []v1alpha1.RouteBackend{{Component: "late", Port: 80}}})}
	g, err := New(Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	empty := Compile(Input{Routes: routes, Services: services})
	g.Swap(empty)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	get := func() (int, string, time.Duration) {
		t.Helper()
		r, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		r.Host = "late.test"
		start := time.Now()
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}

	// No table comes: 503, after the wait.
	if code, body, took := get(); code != http.StatusServiceUnavailable || took < noEndpointWait {
		t.Fatalf("without endpoints: %d %q after %s, want 503 after %s", code, body, took, noEndpointWait)
	}

	// Tables without the endpoint do not end the wait; the one with it does.
	done := make(chan struct{})
	var code int
	var body string
	go func() {
		defer close(done)
		code, body, _ = get()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for g.awaiting.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if g.awaiting.Load() == 0 {
		t.Fatal("the request is not held")
	}
	g.Swap(Compile(Input{Routes: routes, Services: services}))
	es := endpoints(ns, "late", net.JoinHostPort(h, strconv.Itoa(int(p))))
	g.Swap(Compile(Input{Routes: routes, Services: services, EndpointSlices: []*discoveryv1.EndpointSlice{es}}))
	<-done
	if code != http.StatusOK || body != "late /x host=late.test x-test= x-gone=" {
		t.Fatalf("held request: %d %q, want 200 from the endpoint of the later table", code, body)
	}
}
