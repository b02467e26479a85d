package dns

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// DefaultTTL is the records' TTL, CoreDNS's kubernetes plugin's default.
const DefaultTTL = 5

// SpecVersion is the Kubernetes DNS specification version this server implements,
// served as the TXT record dns-version.<zone>.
const SpecVersion = "1.1.0"

// Resolver answers the cluster zone and the reverse names of the addresses in its
// Index. It is pure over the index: no I/O, no clock.
type Resolver struct {
	// Zone is the cluster domain, e.g. "cluster.local" (a trailing dot is optional).
	Zone string
	// Index holds the Services, EndpointSlices and Namespaces.
	Index *Index
	// TTL of every record (default DefaultTTL).
	TTL uint32
}

func (r *Resolver) zone() string {
	if z := r.Zone; strings.HasSuffix(z, ".") && z == strings.ToLower(z) {
		return z // already canonical: no allocation per query
	}
	return strings.ToLower(strings.TrimSuffix(r.Zone, ".")) + "."
}

func (r *Resolver) ttl() uint32 {
	if r.TTL == 0 {
		return DefaultTTL
	}
	return r.TTL
}

// Answer answers req when its question is the resolver's to answer (ok true): a name in
// the zone, or a reverse name of a ClusterIP or endpoint address the index knows. Other
// names (ok false) belong upstream. req must have exactly one question.
func (r *Resolver) Answer(req *dns.Msg) (resp *dns.Msg, ok bool) {
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	zone := r.zone()
	inZone := name == zone || strings.HasSuffix(name, "."+zone)
	if !inZone {
		if a, isRev := reverseAddr(name); isRev {
			return r.answerPTR(req, a)
		}
		return nil, false
	}
	m := r.reply(req)
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m, true
	}
	rel := strings.TrimSuffix(strings.TrimSuffix(name, zone), ".")
	var labels []string
	if rel != "" {
		labels = strings.Split(rel, ".")
	}
	x := r.Index
	x.mu.RLock()
	defer x.mu.RUnlock()
	switch {
	case len(labels) == 0:
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, r.soa(x.serial))
			return m, true
		}
		return r.nodata(m), true
	case len(labels) == 1 && labels[0] == "dns-version":
		if q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: r.hdr(q.Name, dns.TypeTXT), Txt: []string{SpecVersion}})
			return m, true
		}
		return r.nodata(m), true
	}
	kind := labels[len(labels)-1]
	if kind != "svc" && kind != "pod" {
		return r.nxdomain(m), true
	}
	switch len(labels) {
	case 1:
		return r.nodata(m), true
	case 2:
		if _, ok := x.namespaces[labels[0]]; ok {
			return r.nodata(m), true
		}
		return r.nxdomain(m), true
	}
	ns := labels[len(labels)-2]
	if kind == "pod" {
		if len(labels) != 3 {
			return r.nxdomain(m), true
		}
		return r.answerPod(m, labels[0], ns), true
	}
	svcName := labels[len(labels)-3]
	s := x.services[ns+"/"+svcName]
	if s == nil {
		return r.nxdomain(m), true
	}
	switch len(labels) {
	case 3:
		return r.answerService(m, s), true
	case 4:
		return r.answerEndpoint(m, s, labels[0]), true
	case 5:
		p, proto := labels[0], labels[1]
		if !strings.HasPrefix(p, "_") || !strings.HasPrefix(proto, "_") {
			return r.nxdomain(m), true
		}
		return r.answerSRV(m, s, p[1:], proto[1:]), true
	}
	return r.nxdomain(m), true
}

// Handles says Answer answers name itself (the zone, or a reverse name it knows).
func (r *Resolver) Handles(name string) bool {
	name = strings.ToLower(name)
	zone := r.zone()
	if name == zone || strings.HasSuffix(name, "."+zone) {
		return true
	}
	a, ok := reverseAddr(name)
	if !ok {
		return false
	}
	r.Index.mu.RLock()
	defer r.Index.mu.RUnlock()
	return len(r.Index.ptr[a]) > 0
}

func (r *Resolver) reply(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.RecursionAvailable = true
	return m
}

func (r *Resolver) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: r.ttl()}
}

// soa is the zone's SOA, CoreDNS's shape (x.mu held for serial).
func (r *Resolver) soa(serial uint32) *dns.SOA {
	z := r.zone()
	return &dns.SOA{Hdr: r.hdr(z, dns.TypeSOA), Ns: "ns.dns." + z, Mbox: "hostmaster." + z,
		Serial: serial, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: r.ttl()}
}

func (r *Resolver) nodata(m *dns.Msg) *dns.Msg {
	m.Rcode = dns.RcodeSuccess
	m.Answer = nil
	m.Ns = []dns.RR{r.soa(r.Index.serial)}
	return m
}

func (r *Resolver) nxdomain(m *dns.Msg) *dns.Msg {
	m.Rcode = dns.RcodeNameError
	m.Answer = nil
	m.Ns = []dns.RR{r.soa(r.Index.serial)}
	return m
}

// finish: records of the asked type → the answer, none → NODATA.
func (r *Resolver) finish(m *dns.Msg, rrs []dns.RR) *dns.Msg {
	if len(rrs) == 0 {
		return r.nodata(m)
	}
	m.Answer = append(m.Answer, rrs...)
	return m
}

// addrRRs are A or AAAA records (ANY: both) of addrs for the question's type.
func (r *Resolver) addrRRs(name string, qtype uint16, addrs []netip.Addr) []dns.RR {
	var out []dns.RR
	for _, a := range addrs {
		switch {
		case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			out = append(out, &dns.A{Hdr: r.hdr(name, dns.TypeA), A: a.AsSlice()})
		case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			out = append(out, &dns.AAAA{Hdr: r.hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return out
}

func (r *Resolver) serviceFQDN(s *service) string {
	return s.name + "." + s.namespace + ".svc." + r.zone()
}

func (r *Resolver) answerService(m *dns.Msg, s *service) *dns.Msg {
	q := m.Question[0]
	if s.externalName != "" {
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: r.hdr(q.Name, dns.TypeCNAME), Target: s.externalName})
		return m
	}
	addrs := s.clusterIPs
	if s.headless {
		if len(s.endpoints) == 0 {
			return r.nxdomain(m) // CoreDNS: a headless Service without endpoints has no records
		}
		addrs = make([]netip.Addr, len(s.endpoints))
		for i, e := range s.endpoints {
			addrs[i] = e.addr
		}
	}
	if q.Qtype == dns.TypeSRV {
		return r.srv(m, s, "", "")
	}
	return r.finish(m, r.addrRRs(q.Name, q.Qtype, addrs))
}

func (r *Resolver) answerEndpoint(m *dns.Msg, s *service, host string) *dns.Msg {
	q := m.Question[0]
	var addrs []netip.Addr
	for _, e := range s.endpoints {
		if e.hostname == host {
			addrs = append(addrs, e.addr)
		}
	}
	if len(addrs) == 0 {
		return r.nxdomain(m)
	}
	return r.finish(m, r.addrRRs(q.Name, q.Qtype, addrs))
}

func (r *Resolver) answerSRV(m *dns.Msg, s *service, portName, proto string) *dns.Msg {
	if s.externalName != "" {
		return r.nxdomain(m)
	}
	if m.Question[0].Qtype != dns.TypeSRV && m.Question[0].Qtype != dns.TypeANY {
		if !r.hasPort(s, portName, proto) {
			return r.nxdomain(m)
		}
		return r.nodata(m)
	}
	return r.srv(m, s, portName, proto)
}

func (r *Resolver) hasPort(s *service, portName, proto string) bool {
	match := func(p port) bool { return p.name == portName && p.proto == proto }
	if !s.headless {
		for _, p := range s.ports {
			if match(p) {
				return true
			}
		}
		return false
	}
	for _, e := range s.endpoints {
		for _, p := range e.ports {
			if match(p) {
				return true
			}
		}
	}
	return false
}

// srv answers SRV records of s: every port when portName is "", else the named port of
// protocol proto; targets the Service (ClusterIP) or each endpoint (headless), their
// addresses in the additional section. Nothing matching is NXDOMAIN.
func (r *Resolver) srv(m *dns.Msg, s *service, portName, proto string) *dns.Msg {
	q := m.Question[0]
	match := func(p port) bool { return portName == "" || (p.name == portName && p.proto == proto) }
	type target struct {
		host  string
		port  uint16
		addrs []netip.Addr
	}
	var ts []target
	if !s.headless {
		for _, p := range s.ports {
			if match(p) {
				ts = append(ts, target{host: r.serviceFQDN(s), port: p.port, addrs: s.clusterIPs})
			}
		}
	} else {
		for _, e := range s.endpoints {
			for _, p := range e.ports {
				if match(p) {
					ts = append(ts, target{host: e.hostname + "." + r.serviceFQDN(s), port: p.port, addrs: []netip.Addr{e.addr}})
				}
			}
		}
	}
	if len(ts) == 0 {
		if portName == "" {
			return r.nodata(m)
		}
		return r.nxdomain(m)
	}
	weight := uint16(100 / len(ts))
	extra := map[string]bool{}
	for _, t := range ts {
		m.Answer = append(m.Answer, &dns.SRV{Hdr: r.hdr(q.Name, dns.TypeSRV), Priority: 0, Weight: weight, Port: t.port, Target: t.host})
		if !extra[t.host] {
			extra[t.host] = true
			m.Extra = append(m.Extra, r.addrRRs(t.host, dns.TypeANY, t.addrs)...)
		}
	}
	return m
}

// answerPod answers <a-b-c-d>.<ns>.pod.<zone> (and IPv6 with dashes), CoreDNS's
// "pods insecure": any well-formed address in an existing namespace.
func (r *Resolver) answerPod(m *dns.Msg, label, ns string) *dns.Msg {
	if _, ok := r.Index.namespaces[ns]; !ok {
		return r.nxdomain(m)
	}
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return r.nxdomain(m)
	}
	q := m.Question[0]
	return r.finish(m, r.addrRRs(q.Name, q.Qtype, []netip.Addr{a.Unmap()}))
}

// answerPTR answers the reverse name of a; addresses the index does not know go upstream.
func (r *Resolver) answerPTR(req *dns.Msg, a netip.Addr) (*dns.Msg, bool) {
	x := r.Index
	x.mu.RLock()
	defer x.mu.RUnlock()
	names := x.ptr[a]
	if len(names) == 0 {
		return nil, false
	}
	m := r.reply(req)
	q := req.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m, true
	}
	if q.Qtype != dns.TypePTR && q.Qtype != dns.TypeANY {
		m.Ns = []dns.RR{r.soa(x.serial)}
		return m, true
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n.name] {
			continue
		}
		seen[n.name] = true
		m.Answer = append(m.Answer, &dns.PTR{Hdr: r.hdr(q.Name, dns.TypePTR), Ptr: n.name + "." + r.zone()})
	}
	return m, true
}

// reverseAddr parses a reverse name (d.c.b.a.in-addr.arpa., 32 nibbles.ip6.arpa.).
func reverseAddr(name string) (netip.Addr, bool) {
	switch {
	case strings.HasSuffix(name, ".in-addr.arpa."):
		parts := strings.Split(strings.TrimSuffix(name, ".in-addr.arpa."), ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(parts[3] + "." + parts[2] + "." + parts[1] + "." + parts[0])
		return a, err == nil
	case strings.HasSuffix(name, ".ip6.arpa."):
		parts := strings.Split(strings.TrimSuffix(name, ".ip6.arpa."), ".")
		if len(parts) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, p := range parts {
			if len(p) != 1 {
				return netip.Addr{}, false
			}
			v := strings.IndexByte("0123456789abcdef", p[0])
			if v < 0 {
				return netip.Addr{}, false
			}
			n := 31 - i // parts[0] is the last nibble
			if n%2 == 0 {
				b[n/2] |= byte(v) << 4
			} else {
				b[n/2] |= byte(v)
			}
		}
		return netip.AddrFrom16(b).Unmap(), true
	}
	return netip.Addr{}, false
}
