package dns

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Exchanger answers what the resolver does not ([Forwarder]).
type Exchanger interface {
	Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, error)
}

var _ Exchanger = (*Forwarder)(nil)

// maxChase bounds CNAME chains followed for ExternalName answers.
const maxChase = 8

// advertisedUDPSize is the EDNS0 payload size this server announces (the DNS flag day
// 2020 value).
const advertisedUDPSize = 1232

// Handler is the request chain: the resolver for the zone, the upstream for the rest,
// then EDNS0 and truncation, with metrics. It implements dns.Handler.
type Handler struct {
	Resolver *Resolver
	// Upstream answers other names (nil: SERVFAIL for them).
	Upstream Exchanger
	// Metrics, when set, count every request; Server is their "server" label.
	Metrics *Metrics
	Server  string
	Log     *slog.Logger
	// Timeout bounds one request's upstream work (default 5 s).
	Timeout time.Duration
}

var _ dns.Handler = (*Handler)(nil)

// ServeDNS answers one request from the listener (TCP: miekg/dns's server).
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	udp := true
	family := "1"
	if a, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		udp = false
		if a.IP.To4() == nil {
			family = "2"
		}
	} else if a, ok := w.RemoteAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		family = "2"
	}
	if _, err := w.Write(h.respond(req, udp, family, start)); err != nil && h.Log != nil {
		h.Log.Debug("dns: write", "err", err)
	}
}

// respond is the packed answer to req, counted in the metrics.
func (h *Handler) respond(req *dns.Msg, udp bool, family string, start time.Time) []byte {
	ctx := context.Background()
	if !h.local(req) {
		timeout := h.Timeout
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, zone := h.Handle(ctx, req, udp)
	b, err := resp.Pack()
	if err != nil {
		resp = new(dns.Msg)
		resp.SetRcode(req, dns.RcodeServerFailure)
		b, _ = resp.Pack()
	}
	if h.Metrics != nil {
		qtype := uint16(0)
		if len(req.Question) > 0 {
			qtype = req.Question[0].Qtype
		}
		proto := "udp"
		if !udp {
			proto = "tcp"
		}
		h.Metrics.observe(obsKey{server: h.Server, zone: zone, proto: proto, family: family, qtype: typeLabel(qtype), rcode: resp.Rcode}, time.Since(start))
	}
	return b
}

// local says req is answered from the index alone (no upstream round trip, except to
// chase an ExternalName's target).
func (h *Handler) local(req *dns.Msg) bool {
	if len(req.Question) != 1 {
		return true
	}
	return h.Resolver.Handles(req.Question[0].Name)
}

// Handle answers req as it arrived over UDP (udp true) or TCP; zone is the metrics'
// zone label (the cluster zone or "."). The answer fits the client's UDP size.
func (h *Handler) Handle(ctx context.Context, req *dns.Msg, udp bool) (resp *dns.Msg, zone string) {
	zone = "."
	if len(req.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcodeFormatError(req)
		return m, zone
	}
	if req.Opcode != dns.OpcodeQuery {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeNotImplemented)
		return m, zone
	}
	opt := req.IsEdns0()
	if opt != nil && opt.Version() != 0 {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeBadVers)
		m.SetEdns0(advertisedUDPSize, false)
		return m, zone
	}
	resp, local := h.Resolver.Answer(req)
	if local {
		if name := strings.ToLower(req.Question[0].Name); name == h.Resolver.zone() || strings.HasSuffix(name, "."+h.Resolver.zone()) {
			zone = h.Resolver.zone()
		}
		h.chase(ctx, req, resp)
	} else {
		resp = h.forward(ctx, req)
	}
	resp.Id = req.Id
	resp.Extra = withoutOPT(resp.Extra)
	size := dns.MaxMsgSize
	if udp {
		size = dns.MinMsgSize
		if opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
	}
	if opt != nil {
		resp.SetEdns0(advertisedUDPSize, opt.Do())
	}
	resp.Truncate(size)
	return resp, zone
}

func (h *Handler) forward(ctx context.Context, req *dns.Msg) *dns.Msg {
	if h.Upstream != nil {
		m, err := h.Upstream.Exchange(ctx, req)
		if err == nil {
			m.Authoritative = false
			return fixReply(req, m)
		}
		if h.Log != nil {
			h.Log.Debug("dns: upstream", "name", req.Question[0].Name, "err", err)
		}
	}
	m := new(dns.Msg)
	m.SetRcode(req, dns.RcodeServerFailure)
	m.RecursionAvailable = true
	return m
}

// fixReply makes an upstream answer the reply to req: req's ID, question and flags.
func fixReply(req, m *dns.Msg) *dns.Msg {
	m.Id = req.Id
	m.Response = true
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	m.Question = []dns.Question{req.Question[0]}
	m.RecursionAvailable = true
	return m
}

// chase follows a CNAME answer (an ExternalName Service) to its target's records of the
// asked type, as CoreDNS does, in the zone or upstream.
func (h *Handler) chase(ctx context.Context, req, resp *dns.Msg) {
	qtype := req.Question[0].Qtype
	if qtype == dns.TypeCNAME || qtype == dns.TypeANY {
		return
	}
	seen := map[string]bool{strings.ToLower(req.Question[0].Name): true}
	for range maxChase {
		if len(resp.Answer) == 0 {
			return
		}
		cname, ok := resp.Answer[len(resp.Answer)-1].(*dns.CNAME)
		if !ok || seen[strings.ToLower(cname.Target)] {
			return
		}
		seen[strings.ToLower(cname.Target)] = true
		sub := new(dns.Msg)
		sub.SetQuestion(cname.Target, qtype)
		sub.Question[0].Qclass = req.Question[0].Qclass
		sub.RecursionDesired = true
		next, local := h.Resolver.Answer(sub)
		if !local {
			if h.Upstream == nil {
				return
			}
			var err error
			if next, err = h.Upstream.Exchange(ctx, sub); err != nil {
				return
			}
		}
		resp.Answer = append(resp.Answer, next.Answer...)
		resp.Rcode = next.Rcode
		if len(next.Answer) == 0 {
			resp.Ns = next.Ns
			return
		}
		resp.Ns = nil
	}
}
