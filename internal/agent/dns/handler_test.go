package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// upstream is a local authoritative server for example.com. that counts its queries;
// nothing leaves the machine.
type upstream struct {
	addr    string
	queries atomic.Int64
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
			Ns: "ns.example.com.", Mbox: "h.example.com.", Serial: 1, Refresh: 1, Retry: 1, Expire: 1, Minttl: 30}
		switch {
		case q.Name == "www.example.com." && q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 80)})
		case q.Name == "big.example.com." && q.Qtype == dns.TypeTXT:
			for i := range 40 {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
					Txt: []string{fmt.Sprintf("record %02d %s", i, strings.Repeat("x", 40))}})
			}
		case q.Name == "www.example.com.":
			m.Ns = append(m.Ns, soa)
		default:
			m.Rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, soa)
		}
		if w.LocalAddr().Network() == "udp" {
			size := dns.MinMsgSize
			if o := r.IsEdns0(); o != nil {
				size = int(o.UDPSize())
			}
			m.Truncate(size)
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	us, ts := &dns.Server{PacketConn: pc, Handler: mux}, &dns.Server{Listener: l, Handler: mux}
	go func() { _ = us.ActivateAndServe() }()
	go func() { _ = ts.ActivateAndServe() }()
	t.Cleanup(func() { _ = us.Shutdown(); _ = ts.Shutdown() })
	u.addr = pc.LocalAddr().String()
	return u
}

// startServer runs a Handler over testIndex and the upstream on loopback.
func startServer(t *testing.T, up *upstream, now func() time.Time) (string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Resolver: &Resolver{Zone: "cluster.local", Index: testIndex()},
		Upstream: &Forwarder{Servers: []string{up.addr}, Cache: &Cache{Now: now}, Timeout: 5 * time.Second}, Metrics: m, Server: "dns://test"}
	l, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String(), reg
}

func query(t *testing.T, network, addr, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: edns}
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	if edns > 0 {
		req.SetEdns0(edns, false)
	}
	resp, _, err := c.Exchange(req, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	if resp.Id != req.Id || len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, name) {
		t.Fatalf("%s: reply does not match the query: %v", name, resp)
	}
	return resp
}

func TestServerZoneAndUpstream(t *testing.T) {
	up := startUpstream(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	addr, reg := startServer(t, up, now)

	for _, network := range []string{"udp", "tcp"} {
		if got := render(query(t, network, addr, "backend.shop.svc.cluster.local.", dns.TypeA, 0)); got != "NOERROR | A 10.96.0.20" {
			t.Errorf("%s: %s", network, got)
		}
	}
	// ExternalName: the CNAME and its target's address, chased in the zone.
	if got := render(query(t, "udp", addr, "ext.shop.svc.cluster.local.", dns.TypeA, 0)); got != "NOERROR | A 10.96.0.20 | CNAME backend.shop.svc.cluster.local." {
		t.Errorf("ExternalName: %s", got)
	}
	// Upstream, cached: positive, NXDOMAIN and NODATA each reach the upstream once.
	for range 3 {
		if got := render(query(t, "udp", addr, "www.example.com.", dns.TypeA, 0)); got != "NOERROR | A 192.0.2.80" {
			t.Errorf("upstream A: %s", got)
		}
		if got := render(query(t, "udp", addr, "nope.example.com.", dns.TypeA, 0)); got != "NXDOMAIN | SOA example.com." {
			t.Errorf("upstream NXDOMAIN: %s", got)
		}
		if got := render(query(t, "udp", addr, "www.example.com.", dns.TypeAAAA, 0)); got != "NOERROR | SOA example.com." {
			t.Errorf("upstream NODATA: %s", got)
		}
	}
	if n := up.queries.Load(); n != 3 {
		t.Errorf("upstream saw %d queries, want 3 (the rest from the cache)", n)
	}
	// The cached answer's TTL counts down; the negative one expires after the SOA minimum.
	clock.Add(int64(100 * time.Second))
	if r := query(t, "udp", addr, "www.example.com.", dns.TypeA, 0); len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 200 {
		t.Errorf("cached TTL after 100 s: %v", r.Answer)
	}
	query(t, "udp", addr, "nope.example.com.", dns.TypeA, 0)
	if n := up.queries.Load(); n != 4 {
		t.Errorf("upstream saw %d queries, want 4 (the negative answer expired after 30 s)", n)
	}

	// Truncation: without EDNS0 a big answer is cut to 512 bytes with TC; with EDNS0 4096
	// it comes whole; over TCP always whole.
	r := query(t, "udp", addr, "big.example.com.", dns.TypeTXT, 0)
	if !r.Truncated {
		t.Errorf("512-byte UDP answer not truncated (%d records)", len(r.Answer))
	}
	r.Compress = true // as it came over the wire
	if b, _ := r.Pack(); len(b) > 512 {
		t.Errorf("UDP answer %d bytes > 512", len(b))
	}
	r = query(t, "udp", addr, "big.example.com.", dns.TypeTXT, 4096)
	if r.Truncated || len(r.Answer) != 40 || r.IsEdns0() == nil {
		t.Errorf("EDNS0 4096: truncated %v, %d records, OPT %v", r.Truncated, len(r.Answer), r.IsEdns0())
	}
	if r := query(t, "tcp", addr, "big.example.com.", dns.TypeTXT, 0); r.Truncated || len(r.Answer) != 40 {
		t.Errorf("TCP: truncated %v, %d records", r.Truncated, len(r.Answer))
	}

	// Metrics.
	if n := testutil.ToFloat64(mustCounter(t, reg, "coredns_dns_requests_total")); n < 10 {
		t.Errorf("coredns_dns_requests_total = %v", n)
	}
	if n, err := testutil.GatherAndCount(reg, "coredns_dns_responses_total", "coredns_dns_request_duration_seconds"); err != nil || n < 3 {
		t.Errorf("responses/duration series: %d, %v", n, err)
	}
	nx := `
# HELP coredns_dns_responses_total Counter of response status codes.
# TYPE coredns_dns_responses_total counter
coredns_dns_responses_total{plugin="",rcode="NXDOMAIN",server="dns://test",zone="."} 4
`
	// Only the NXDOMAIN series is compared: 4 upstream NXDOMAIN answers.
	if err := testutil.GatherAndCompare(filterRcode(reg, "NXDOMAIN"), strings.NewReader(nx), "coredns_dns_responses_total"); err != nil {
		t.Error(err)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	c.Add(total)
	return c
}

// filterRcode gathers only the responses series with that rcode.
func filterRcode(reg *prometheus.Registry, rcode string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		for _, mf := range mfs {
			var keep []*dto.Metric
			for _, m := range mf.Metric {
				for _, l := range m.GetLabel() {
					if l.GetName() == "rcode" && l.GetValue() == rcode {
						keep = append(keep, m)
					}
				}
			}
			if mf.GetName() == "coredns_dns_responses_total" {
				mf.Metric = keep
			}
		}
		return mfs, err
	})
}

func TestHandlerRefusals(t *testing.T) {
	h := &Handler{Resolver: &Resolver{Zone: "cluster.local", Index: testIndex()}}
	ctx := context.Background()
	req := new(dns.Msg)
	req.SetQuestion("backend.shop.svc.cluster.local.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.IsEdns0().SetVersion(1)
	if r, _ := h.Handle(ctx, req, true); r.Rcode != dns.RcodeBadVers {
		t.Errorf("EDNS version 1: %s", dns.RcodeToString[r.Rcode])
	}
	req = new(dns.Msg)
	req.SetQuestion("backend.shop.svc.cluster.local.", dns.TypeA)
	req.Opcode = dns.OpcodeNotify
	if r, _ := h.Handle(ctx, req, true); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("NOTIFY: %s", dns.RcodeToString[r.Rcode])
	}
	req = new(dns.Msg)
	req.Question = nil
	if r, _ := h.Handle(ctx, req, true); r.Rcode != dns.RcodeFormatError {
		t.Errorf("no question: %s", dns.RcodeToString[r.Rcode])
	}
	req = new(dns.Msg)
	req.SetQuestion("backend.shop.svc.cluster.local.", dns.TypeA)
	req.Question[0].Qclass = dns.ClassCHAOS
	if r, _ := h.Handle(ctx, req, true); r.Rcode != dns.RcodeRefused {
		t.Errorf("CHAOS class: %s", dns.RcodeToString[r.Rcode])
	}
	// No upstream: names outside the zone get SERVFAIL.
	req = new(dns.Msg)
	req.SetQuestion("example.com.", dns.TypeA)
	if r, zone := h.Handle(ctx, req, true); r.Rcode != dns.RcodeServerFailure || zone != "." {
		t.Errorf("no upstream: %s zone %s", dns.RcodeToString[r.Rcode], zone)
	}
	// A headless Service with many endpoints over UDP: truncated, still an answer.
	x := NewIndex()
	x.SetNamespace("big")
	x.SetService(svc("big", "many", func(s *corev1.Service) { s.Spec.ClusterIP = "None" }))
	var eps []discoveryv1.Endpoint
	for i := range 200 {
		eps = append(eps, ep(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), true, ""))
	}
	x.SetEndpointSlice(slice("big", "many-1", "many", discoveryv1.AddressTypeIPv4, nil, eps...))
	h = &Handler{Resolver: &Resolver{Zone: "cluster.local", Index: x}}
	req = new(dns.Msg)
	req.SetQuestion("many.big.svc.cluster.local.", dns.TypeA)
	r, zone := h.Handle(ctx, req, true)
	if !r.Truncated || len(r.Answer) == 0 || len(r.Answer) >= 200 || zone != "cluster.local." {
		t.Errorf("200 endpoints over UDP: truncated %v with %d answers, zone %s", r.Truncated, len(r.Answer), zone)
	}
	if r, _ := h.Handle(ctx, req, false); r.Truncated || len(r.Answer) != 200 {
		t.Errorf("200 endpoints over TCP: truncated %v with %d answers", r.Truncated, len(r.Answer))
	}
}

func TestUpstreams(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver 10.96.0.10\nnameserver 127.0.0.53\nnameserver fd00::1\nsearch x\noptions ndots:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Upstreams(p, netip.MustParseAddr("10.96.0.10"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "127.0.0.53:53,[fd00::1]:53" {
		t.Errorf("upstreams %v", got)
	}
	if _, err := Upstreams(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing resolv.conf is no error")
	}
}

// TestServerMalformed: a packet with a query's header that does not parse gets FORMERR
// with its ID; the server keeps answering.
func TestServerMalformed(t *testing.T) {
	addr, _ := startServer(t, startUpstream(t), nil)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// ID 0x1234, RD, one question whose name runs past the packet's end.
	if _, err := conn.Write([]byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 63, 'a', 'b'}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil || m.Id != 0x1234 || m.Rcode != dns.RcodeFormatError || !m.Response {
		t.Fatalf("reply to a malformed query: %v %v", m, err)
	}
	if got := render(query(t, "udp", addr, "backend.shop.svc.cluster.local.", dns.TypeA, 0)); got != "NOERROR | A 10.96.0.20" {
		t.Errorf("after the malformed packet: %s", got)
	}
}
