// Package dns tests the node-local cluster DNS as pods meet it: one in-process `kube
// server --agent` (test/netharness) whose agent answers on the kube-dns Service's
// ClusterIP (the tenth address of the package's Service CIDR) on an interface of the
// package's own (kd<pid>), real busybox pods resolving names with nslookup and wget, and
// queries straight to the listener with miekg/dns's client.
//
// No query leaves the machine: the node's resolv.conf names an upstream server of this
// package (miekg/dns on 127.53.N.1:53, N from the pid), authoritative for example.test.
package dns

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"kubeos.dev/kube/internal/agent"
	agentdns "kubeos.dev/kube/internal/agent/dns"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/test/netharness"
)

var (
	c *netharness.Cluster
	// dnsAddr is the kube-dns ClusterIP (host:53 in dnsHostPort).
	dnsAddr, dnsHostPort string
	iface                string
	// upstreamQueries counts what reached the upstream server.
	upstreamQueries atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	pid := os.Getpid()
	iface = fmt.Sprintf("kd%d", pid)
	upstream := fmt.Sprintf("127.53.%d.1", pid%250)
	stop, err := startUpstream(net.JoinHostPort(upstream, "53"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream DNS:", err)
		return 1
	}
	defer stop()
	dir, err := os.MkdirTemp("", "kube-dns-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+upstream+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer agentdns.RemoveLink(contextBackground(), iface)
	return netharness.Run(m, netharness.Options{Name: "dns", Server: func(so *server.Options) {
		ip, err := server.ClusterDNSAddress("", so.ServiceClusterIPRange)
		if err != nil {
			panic(err)
		}
		dnsAddr, dnsHostPort = ip, net.JoinHostPort(ip, "53")
		so.AgentResolvConf = resolv
		so.AgentDNS = agent.DNSOptions{Enabled: true, Interface: iface}
		// The in-process agent is not told the address by the server (see the report):
		// its pods get it here.
		so.AgentClusterDNS = []string{ip}
	}}, &c)
}

// startUpstream serves example.test.: www A 192.0.2.7, alias CNAME www, everything else
// NXDOMAIN with the SOA (minimum 60 s), over UDP and TCP.
func startUpstream(addr string) (func(), error) {
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "ns.example.test.", Mbox: "h.example.test.", Serial: 1, Refresh: 60, Retry: 60, Expire: 60, Minttl: 60}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		upstreamQueries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		q := r.Question[0]
		switch dns.CanonicalName(q.Name) {
		case "www.example.test.":
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 7)})
			} else {
				m.Ns = append(m.Ns, soa)
			}
		default:
			m.Rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, soa)
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, err
	}
	us, ts := &dns.Server{PacketConn: pc, Handler: mux}, &dns.Server{Listener: l, Handler: mux}
	go func() { _ = us.ActivateAndServe() }()
	go func() { _ = ts.ActivateAndServe() }()
	return func() { _ = us.Shutdown(); _ = ts.Shutdown() }, nil
}
