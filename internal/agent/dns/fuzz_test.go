package dns

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// fakeUpstream answers every name with one A record, or fails for names starting "fail".
type fakeUpstream struct{}

func (fakeUpstream) Exchange(_ context.Context, req *dns.Msg) (*dns.Msg, error) {
	if strings.HasPrefix(req.Question[0].Name, "fail") {
		return nil, errors.New("upstream down")
	}
	m := new(dns.Msg)
	m.SetReply(req)
	rr, err := dns.NewRR(". 30 IN A 192.0.2.1")
	if err == nil {
		rr.Header().Name = req.Question[0].Name
		m.Answer = append(m.Answer, rr)
	}
	return m, nil
}

func fuzzHandler() *Handler {
	return &Handler{Resolver: &Resolver{Zone: "cluster.local", Index: testIndex()}, Upstream: fakeUpstream{}}
}

// check: the answer packs, matches the request, and fits a UDP client's buffer.
func check(t *testing.T, req, resp *dns.Msg, udp bool) {
	b, err := resp.Pack()
	if err != nil {
		t.Fatalf("answer does not pack: %v\n%v", err, resp)
	}
	if resp.Id != req.Id || !resp.Response {
		t.Fatalf("answer id %d response %v for request %d", resp.Id, resp.Response, req.Id)
	}
	limit := dns.MaxMsgSize
	if udp {
		limit = dns.MinMsgSize
		if o := req.IsEdns0(); o != nil && o.Version() == 0 {
			limit = max(int(o.UDPSize()), dns.MinMsgSize)
		}
	}
	if len(b) > limit {
		t.Fatalf("answer %d bytes > %d", len(b), limit)
	}
}

// FuzzHandleWire feeds raw packets: a packet that does not parse is the listener's
// FORMERR; every one that does gets an answer that packs.
func FuzzHandleWire(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"backend.shop.svc.cluster.local.", dns.TypeA}, {"_http._tcp.web.shop.svc.cluster.local.", dns.TypeSRV},
		{"web.shop.svc.cluster.local.", dns.TypeANY}, {"ext.shop.svc.cluster.local.", dns.TypeA},
		{"20.0.96.10.in-addr.arpa.", dns.TypePTR}, {"example.com.", dns.TypeANY}, {"fail.example.", dns.TypeA},
		{strings.Repeat("a.", 126), dns.TypeA}, {"10-1-2-3.shop.pod.cluster.local.", dns.TypeAAAA},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		b, _ := m.Pack()
		f.Add(b, true)
		m.SetEdns0(4096, true)
		b, _ = m.Pack()
		f.Add(b, false)
	}
	f.Add([]byte{0, 1, 2}, true)
	h := fuzzHandler()
	f.Fuzz(func(t *testing.T, b []byte, udp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil || req.Response {
			return
		}
		resp, _ := h.Handle(context.Background(), req, udp)
		check(t, req, resp, udp)
	})
}

// FuzzName asks arbitrary names and types, in and out of the zone.
func FuzzName(f *testing.F) {
	for _, s := range []string{"backend.shop.svc", "web-0.web.shop.svc", "_http._tcp.web.shop.svc", "x.y.z.shop.pod",
		"1-2-3-4.shop.pod", "dns-version", "", "..", "\\000.svc", strings.Repeat("x", 300)} {
		f.Add(s, uint16(dns.TypeA), true)
	}
	h := fuzzHandler()
	f.Fuzz(func(t *testing.T, label string, qtype uint16, inZone bool) {
		name := label
		if inZone {
			name += ".cluster.local"
		}
		name = dns.Fqdn(name)
		if _, ok := dns.IsDomainName(name); !ok {
			return
		}
		req := new(dns.Msg)
		req.SetQuestion(name, qtype)
		if _, err := req.Pack(); err != nil {
			return // a name no client could send
		}
		resp, _ := h.Handle(context.Background(), req, true)
		check(t, req, resp, true)
	})
}
