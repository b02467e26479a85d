package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	kubeosfake "kubeos.dev/kube/pkg/client/clientset/versioned/fake"
)

// TestRunFollowsChurn runs the gateway over fake API clients: a burst of EndpointSlice
// changes (coalesced into fewer compilations) ends with the gateway serving the last
// one's endpoint, and the access log holds every request once Run has ended.
func TestRunFollowsChurn(t *testing.T) {
	ns := "t"
	aH, aP := backend(t, "a", nil)
	bH, bP := backend(t, "b", nil)
	slice := endpoints(ns, "web", net.JoinHostPort(aH, fmt.Sprint(aP)))
	kc := kubefake.NewClientset(svcs(ns, "web")[0], slice)
	xc := kubeosfake.NewClientset(route(ns, "r", 1, []string{"run.test"}, to("web")))
	log := &lockedBuffer{}
	reg := prometheus.NewRegistry()
	addr := make(chan net.Addr, 1)
	g, err := New(Options{Kube: kc, Kubeos: xc, HTTPAddr: "127.0.0.1:0", AccessLog: log, Registerer: reg,
		Ready: func(h, _ net.Addr) { addr <- h }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	requests := 0
	get := func() string {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/x", nil)
		req.Host = "run.test"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		requests++
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(b)
	}
	if got := get(); !strings.HasPrefix(got, "200 OK a /x") {
		t.Fatalf("before the churn: %q", got)
	}

	// 40 changes back to back, alternating between the two endpoints, ending on b.
	for i := range 40 {
		s := slice.DeepCopy()
		h, p := aH, aP
		if i%2 == 1 {
			h, p = bH, bP
		}
		s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{h}}}
		s.Ports[0].Port = &p
		s.ResourceVersion = fmt.Sprint(i + 2)
		if _, err := kc.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for got := get(); !strings.HasPrefix(got, "200 OK b /x"); got = get() {
		if time.Now().After(deadline) {
			t.Fatalf("after the churn the gateway still answers %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("40 EndpointSlice changes: %v table compilations", testutil.ToFloat64(g.metrics.builds))

	// A Service deleted: its Route's requests get 500 (the backend no longer resolves).
	if err := kc.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for got := get(); !strings.HasPrefix(got, "500 "); got = get() {
		if time.Now().After(deadline) {
			t.Fatalf("after the Service's deletion: %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil // for the deferred receive
	s, _ := log.get()
	if n := strings.Count(s, "\n"); n != requests {
		t.Errorf("access log: %d lines for %d requests", n, requests)
	}
	if !strings.Contains(s, " route=t/r host=run.test method=GET path=/x status=200 ") {
		t.Errorf("access log lacks a served request:\n%s", s[:min(len(s), 600)])
	}
}
