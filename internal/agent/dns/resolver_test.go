package dns

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func svc(ns, name string, mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mutate(s)
	return s
}

func slice(ns, name, svcName string, af discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: af, Ports: ports, Endpoints: eps,
	}
}

func ep(addr string, ready bool, hostname string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	if hostname != "" {
		e.Hostname = ptr.To(hostname)
	}
	return e
}

func epPort(name string, p int32, proto corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(p), Protocol: ptr.To(proto)}
}

// testIndex is a small cluster: namespaces shop and kube-system, a ClusterIP Service
// (dual-stack), a headless StatefulSet Service with a not-ready pod, one with
// publishNotReadyAddresses, an ExternalName Service and a headless Service without
// endpoints.
func testIndex() *Index {
	x := NewIndex()
	x.SetNamespace("shop")
	x.SetNamespace("kube-system")
	x.SetService(svc("shop", "backend", func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20", "fd00::20"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
	}))
	x.SetEndpointSlice(slice("shop", "backend-abc", "backend", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{epPort("http", 8080, corev1.ProtocolTCP)}, ep("10.244.0.5", true, "")))
	x.SetService(svc("shop", "web", func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80}}
	}))
	x.SetEndpointSlice(slice("shop", "web-1", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{epPort("http", 80, corev1.ProtocolTCP)},
		ep("10.244.0.10", true, "web-0"), ep("10.244.0.11", true, "web-1"), ep("10.244.0.12", false, "web-2")))
	x.SetService(svc("shop", "peers", func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		s.Spec.PublishNotReadyAddresses = true
	}))
	x.SetEndpointSlice(slice("shop", "peers-1", "peers", discoveryv1.AddressTypeIPv4, nil, ep("10.244.0.30", false, "")))
	x.SetService(svc("shop", "ext", func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "backend.shop.svc.cluster.local"
	}))
	x.SetService(svc("shop", "empty", func(s *corev1.Service) { s.Spec.ClusterIP = "None" }))
	return x
}

// answer is a compact rendering of a reply: rcode, answers, and "SOA" when the
// authority section has the zone's SOA.
func render(m *dns.Msg) string {
	var parts []string
	parts = append(parts, dns.RcodeToString[m.Rcode])
	var ans []string
	for _, rr := range m.Answer {
		s := strings.TrimPrefix(rr.String(), rr.Header().String())
		ans = append(ans, dns.TypeToString[rr.Header().Rrtype]+" "+s)
	}
	sort.Strings(ans)
	parts = append(parts, ans...)
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			parts = append(parts, "SOA "+soa.Hdr.Name)
		}
	}
	return strings.Join(parts, " | ")
}

func TestResolver(t *testing.T) {
	r := &Resolver{Zone: "cluster.local", Index: testIndex()}
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string // "" = not the resolver's (upstream)
	}{
		{"backend.shop.svc.cluster.local.", dns.TypeA, "NOERROR | A 10.96.0.20"},
		{"BackEnd.Shop.SVC.cluster.LOCAL.", dns.TypeA, "NOERROR | A 10.96.0.20"},
		{"backend.shop.svc.cluster.local.", dns.TypeAAAA, "NOERROR | AAAA fd00::20"},
		{"backend.shop.svc.cluster.local.", dns.TypeTXT, "NOERROR | SOA cluster.local."},
		{"backend.shop.svc.cluster.local.", dns.TypeANY, "NOERROR | A 10.96.0.20 | AAAA fd00::20"},
		{"backend.shop.svc.cluster.local.", dns.TypeSRV, "NOERROR | SRV 0 50 53 backend.shop.svc.cluster.local. | SRV 0 50 80 backend.shop.svc.cluster.local."},
		{"_http._tcp.backend.shop.svc.cluster.local.", dns.TypeSRV, "NOERROR | SRV 0 100 80 backend.shop.svc.cluster.local."},
		{"_dns._udp.backend.shop.svc.cluster.local.", dns.TypeSRV, "NOERROR | SRV 0 100 53 backend.shop.svc.cluster.local."},
		{"_dns._tcp.backend.shop.svc.cluster.local.", dns.TypeSRV, "NXDOMAIN | SOA cluster.local."},
		{"_http._tcp.backend.shop.svc.cluster.local.", dns.TypeA, "NOERROR | SOA cluster.local."},
		{"http.tcp.backend.shop.svc.cluster.local.", dns.TypeSRV, "NXDOMAIN | SOA cluster.local."},
		{"nope.shop.svc.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		{"backend.nons.svc.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		// Headless: ready endpoints only; hostnames; SRV per endpoint.
		{"web.shop.svc.cluster.local.", dns.TypeA, "NOERROR | A 10.244.0.10 | A 10.244.0.11"},
		{"web.shop.svc.cluster.local.", dns.TypeAAAA, "NOERROR | SOA cluster.local."},
		{"web-0.web.shop.svc.cluster.local.", dns.TypeA, "NOERROR | A 10.244.0.10"},
		{"web-2.web.shop.svc.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		{"web-0.web.shop.svc.cluster.local.", dns.TypeAAAA, "NOERROR | SOA cluster.local."},
		{"_http._tcp.web.shop.svc.cluster.local.", dns.TypeSRV, "NOERROR | SRV 0 50 80 web-0.web.shop.svc.cluster.local. | SRV 0 50 80 web-1.web.shop.svc.cluster.local."},
		// A ClusterIP Service's endpoints are named too (dashed address without hostname).
		{"10-244-0-5.backend.shop.svc.cluster.local.", dns.TypeA, "NOERROR | A 10.244.0.5"},
		// publishNotReadyAddresses.
		{"peers.shop.svc.cluster.local.", dns.TypeA, "NOERROR | A 10.244.0.30"},
		{"10-244-0-30.peers.shop.svc.cluster.local.", dns.TypeA, "NOERROR | A 10.244.0.30"},
		// Headless without endpoints: no records at all, as CoreDNS.
		{"empty.shop.svc.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		// ExternalName.
		{"ext.shop.svc.cluster.local.", dns.TypeA, "NOERROR | CNAME backend.shop.svc.cluster.local."},
		{"ext.shop.svc.cluster.local.", dns.TypeCNAME, "NOERROR | CNAME backend.shop.svc.cluster.local."},
		// Pods.
		{"10-244-0-99.shop.pod.cluster.local.", dns.TypeA, "NOERROR | A 10.244.0.99"},
		{"10-244-0-99.shop.pod.cluster.local.", dns.TypeAAAA, "NOERROR | SOA cluster.local."},
		{"fd00--1.shop.pod.cluster.local.", dns.TypeAAAA, "NOERROR | AAAA fd00::1"},
		{"10-244-0-99.nons.pod.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		{"not-an-ip.shop.pod.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		// Intermediate names exist (NODATA); unknown ones do not.
		{"cluster.local.", dns.TypeA, "NOERROR | SOA cluster.local."},
		{"cluster.local.", dns.TypeSOA, "NOERROR | SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5"},
		{"svc.cluster.local.", dns.TypeA, "NOERROR | SOA cluster.local."},
		{"shop.svc.cluster.local.", dns.TypeA, "NOERROR | SOA cluster.local."},
		{"nons.svc.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		{"pod.cluster.local.", dns.TypeA, "NOERROR | SOA cluster.local."},
		{"foo.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		{"a.b.c.web-0.web.shop.svc.cluster.local.", dns.TypeA, "NXDOMAIN | SOA cluster.local."},
		{"dns-version.cluster.local.", dns.TypeTXT, "NOERROR | TXT \"1.1.0\""},
		{"dns-version.cluster.local.", dns.TypeA, "NOERROR | SOA cluster.local."},
		// Reverse: ClusterIPs and headless endpoints; others go upstream.
		{"20.0.96.10.in-addr.arpa.", dns.TypePTR, "NOERROR | PTR backend.shop.svc.cluster.local."},
		{"10.0.244.10.in-addr.arpa.", dns.TypePTR, "NOERROR | PTR web-0.web.shop.svc.cluster.local."},
		{"0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, "NOERROR | PTR backend.shop.svc.cluster.local."},
		{"99.99.99.10.in-addr.arpa.", dns.TypePTR, ""},
		{"example.com.", dns.TypeA, ""},
		{"cluster.local.example.com.", dns.TypeA, ""},
	} {
		req := new(dns.Msg)
		req.SetQuestion(tc.name, tc.qtype)
		resp, ok := r.Answer(req)
		got := ""
		if ok {
			got = render(resp)
			if tc.qtype == dns.TypeSOA {
				got = strings.Replace(got, "SOA SOA", "SOA", 1)
			}
			if !resp.Authoritative {
				t.Errorf("%s %s: not authoritative", tc.name, dns.TypeToString[tc.qtype])
			}
			for _, rr := range resp.Answer {
				if rr.Header().Ttl != DefaultTTL || rr.Header().Name != tc.name {
					t.Errorf("%s: record %v: want TTL 5 and the question's name", tc.name, rr)
				}
			}
		}
		if tc.qtype == dns.TypeSOA && ok {
			soa := resp.Answer[0].(*dns.SOA)
			soa.Serial = 0
			got = "NOERROR | SOA " + strings.TrimPrefix(soa.String(), soa.Hdr.String())
		}
		if got != tc.want {
			t.Errorf("%s %s:\n got %q\nwant %q", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
}

func TestResolverSRVAdditional(t *testing.T) {
	r := &Resolver{Zone: "cluster.local.", Index: testIndex()}
	req := new(dns.Msg)
	req.SetQuestion("_http._tcp.web.shop.svc.cluster.local.", dns.TypeSRV)
	resp, _ := r.Answer(req)
	var extra []string
	for _, rr := range resp.Extra {
		extra = append(extra, rr.Header().Name+" "+rr.(*dns.A).A.String())
	}
	slices.Sort(extra)
	want := []string{"web-0.web.shop.svc.cluster.local. 10.244.0.10", "web-1.web.shop.svc.cluster.local. 10.244.0.11"}
	if !slices.Equal(extra, want) {
		t.Errorf("additional: %v, want %v", extra, want)
	}
}

func TestIndexUpdates(t *testing.T) {
	x := testIndex()
	r := &Resolver{Zone: "cluster.local", Index: x}
	ask := func(name string, qtype uint16) string {
		req := new(dns.Msg)
		req.SetQuestion(name, qtype)
		resp, ok := r.Answer(req)
		if !ok {
			return "upstream"
		}
		return render(resp)
	}
	// The not-ready pod becomes ready; one slice moves to another Service.
	x.SetEndpointSlice(slice("shop", "web-1", "web", discoveryv1.AddressTypeIPv4, nil, ep("10.244.0.12", true, "web-2")))
	if got := ask("web.shop.svc.cluster.local.", dns.TypeA); got != "NOERROR | A 10.244.0.12" {
		t.Errorf("after slice update: %s", got)
	}
	if got := ask("10.0.244.10.in-addr.arpa.", dns.TypePTR); got != "upstream" {
		t.Errorf("PTR of a gone endpoint: %s", got)
	}
	x.SetEndpointSlice(slice("shop", "web-1", "peers", discoveryv1.AddressTypeIPv4, nil, ep("10.244.0.12", true, "")))
	if got := ask("web.shop.svc.cluster.local.", dns.TypeA); got != "NXDOMAIN | SOA cluster.local." {
		t.Errorf("after the slice moved: %s", got)
	}
	if got := ask("peers.shop.svc.cluster.local.", dns.TypeA); got != "NOERROR | A 10.244.0.12 | A 10.244.0.30" {
		t.Errorf("peers after the slice moved: %s", got)
	}
	x.DeleteService("shop", "backend")
	if got := ask("backend.shop.svc.cluster.local.", dns.TypeA); got != "NXDOMAIN | SOA cluster.local." {
		t.Errorf("deleted service: %s", got)
	}
	if got := ask("20.0.96.10.in-addr.arpa.", dns.TypePTR); got != "upstream" {
		t.Errorf("PTR of a deleted service: %s", got)
	}
	x.DeleteEndpointSlice("shop", "web-1")
	x.DeleteEndpointSlice("shop", "peers-1")
	if got := ask("peers.shop.svc.cluster.local.", dns.TypeA); got != "NXDOMAIN | SOA cluster.local." {
		t.Errorf("peers without slices: %s", got)
	}
	x.DeleteNamespace("shop")
	if got := ask("shop.svc.cluster.local.", dns.TypeA); got != "NXDOMAIN | SOA cluster.local." {
		t.Errorf("deleted namespace: %s", got)
	}
}
