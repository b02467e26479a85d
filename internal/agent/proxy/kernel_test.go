package proxy

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// inNetns runs the test's remaining code in a new network namespace of its own (lo up,
// 10.1.0.1 and 10.1.0.2 on lo as "endpoints"); the thread is discarded afterwards.
func inNetns(t testing.TB) {
	t.Helper()
	runtime.LockOSThread() // never unlocked: the thread dies with the test goroutine
	if _, err := netns.New(); err != nil {
		t.Fatalf("new network namespace: %v", err)
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", "10.1.0.1/32", "dev", "lo"}, {"addr", "add", "10.1.0.2/32", "dev", "lo"}} {
		// ip runs in this thread's namespace: exec's child inherits it.
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
}

// serve answers every connection on addr with name.
func serve(t testing.TB, addr, name string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(conn, name)
			conn.Close()
		}
	}()
}

func fetch(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

// TestKernel programs a private namespace's nftables from Services and EndpointSlices and
// sends real connections through it: a ClusterIP balanced over two endpoints, a NodePort,
// a Service without endpoints refused, an incremental change rewriting only what changed,
// and Cleanup removing it all.
func TestKernel(t *testing.T) {
	inNetns(t)
	serve(t, "10.1.0.1:8080", "one")
	serve(t, "10.1.0.2:8080", "two")
	px, err := New(Options{Client: fake.NewClientset(), NodeName: node, NodeIP: "10.1.0.1", Table: "kt-test",
		ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	web := svcObj("web", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 30080 })
	empty := svcObj("empty", func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"} })
	px.OnServiceAdd(web)
	px.OnServiceAdd(empty)
	slice := sliceObj("web", readyOn("10.1.0.1", node), readyOn("10.1.0.2", "b"))
	slice.ResourceVersion = "1"
	px.OnEndpointSliceAdd(slice)
	if err := px.sync(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 200 && len(seen) < 2; i++ {
		got, err := fetch("10.96.0.10:80")
		if err != nil {
			t.Fatalf("ClusterIP: %v", err)
		}
		seen[got] = true
	}
	if !seen["one"] || !seen["two"] {
		t.Errorf("ClusterIP answers %v, want one and two", seen)
	}
	if got, err := fetch("10.1.0.1:30080"); err != nil || (got != "one" && got != "two") {
		t.Errorf("NodePort: %q, %v", got, err)
	}
	if _, err := fetch("10.96.0.11:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Service without endpoints: %v, want connection refused", err)
	}
	if _, err := fetch("10.96.0.99:80"); err == nil {
		t.Errorf("an unprogrammed ClusterIP answered")
	}

	// /debug/services and the metrics say what is programmed, from which slice revision.
	rec := httptest.NewRecorder()
	px.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/services", nil))
	var st debugState
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Services) != 2 || st.Services[1].Service != "ns/web:http" || len(st.Services[1].Cluster) != 2 ||
		st.Services[0].Internal != "goto reject-chain" || st.EndpointSlices["ns/web"]["web-1"] != "1" {
		t.Errorf("/debug/services:\n%s", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	px.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, m := range []string{"kubeproxy_sync_proxy_rules_duration_seconds_count 1", "kubeproxy_programmed_service_ports 2", "kubeproxy_programmed_endpoints 2"} {
		if !strings.Contains(rec.Body.String(), m) {
			t.Errorf("metrics lack %q:\n%s", m, rec.Body.String())
		}
	}

	// One endpoint goes: its chain and the svc chain change, nothing else.
	before := px.prog.chains
	kept := map[string]string{}
	for k, v := range before {
		kept[k] = v
	}
	slice2 := sliceObj("web", readyOn("10.1.0.2", "b"))
	slice2.ResourceVersion = "2"
	px.OnEndpointSliceUpdate(slice, slice2)
	if err := px.sync(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if got, err := fetch("10.96.0.10:80"); err != nil || got != "two" {
			t.Fatalf("after the change: %q, %v", got, err)
		}
	}
	changed := 0
	for k, v := range px.prog.chains {
		if kept[k] != v {
			changed++
		}
	}
	if changed != 1 { // svc-<h> rewritten (its modulus); its DNAT map lost an element
		t.Errorf("%d chains rewritten, want 1 (the svc chain)", changed)
	}
	if len(px.prog.chains) != len(kept) {
		t.Errorf("%d chains, want %d", len(px.prog.chains), len(kept))
	}
	// An endpoint replaced by another (same count): only the DNAT map's element changes.
	slice3 := sliceObj("web", readyOn("10.1.0.1", node))
	slice3.ResourceVersion = "3"
	px.OnEndpointSliceUpdate(slice2, slice3)
	chainsBefore := maps.Clone(px.prog.chains)
	if err := px.sync(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(chainsBefore, px.prog.chains) {
		t.Errorf("an endpoint replaced rewrote chains")
	}
	for i := 0; i < 20; i++ {
		if got, err := fetch("10.96.0.10:80"); err != nil || got != "one" {
			t.Fatalf("after the replacement: %q, %v", got, err)
		}
	}

	// A second proxier on the same table (a restarted agent) takes over without losing
	// the rules, then Cleanup removes everything.
	px2, err := New(Options{Client: fake.NewClientset(), NodeName: node, NodeIP: "10.1.0.1", Table: "kt-test",
		ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fetch("10.96.0.10:80"); err != nil || got != "one" {
		t.Fatalf("after a restart's setup: %q, %v", got, err)
	}
	px2.OnServiceAdd(web)
	px2.OnEndpointSliceAdd(sliceObj("web", readyOn("10.1.0.2", "b")))
	if err := px2.sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := fetch("10.96.0.10:80"); err != nil || got != "two" {
		t.Fatalf("after the restart's first sync: %q, %v", got, err)
	}
	if _, err := fetch("10.96.0.11:80"); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		// empty is not known to px2: its ClusterIP is no longer programmed at all.
		if err == nil {
			t.Errorf("stale Service answered")
		}
	}
	if err := Cleanup(t.Context(), "kt-test", "10.96.0.0/12"); err != nil {
		t.Fatal(err)
	}
	conn, _ := nftables.New()
	if tb, err := conn.ListTableOfFamily("kt-test", nftables.TableFamilyIPv4); err == nil && tb != nil {
		t.Errorf("table still there after Cleanup")
	}
	out, _ := exec.Command("ip", "route", "show", "table", "main").CombinedOutput()
	if strings.Contains(string(out), "10.96.") {
		t.Errorf("routes after Cleanup:\n%s", out)
	}
}
