package servicesnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	agentdns "kubeos.dev/kube/internal/agent/dns"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/test/netharness"
)

// ask sends one query to the node-local DNS over network (udp, tcp).
func ask(network, name string, qtype uint16) (*dns.Msg, error) {
	cl := &dns.Client{Net: network, Timeout: 3 * time.Second}
	req := new(dns.Msg)
	req.SetQuestion(dns.Fqdn(name), qtype)
	resp, _, err := cl.Exchange(req, dnsHostPort)
	return resp, err
}

// summary is rcode, the answers' data sorted, and "+SOA" when the authority has a SOA.
func summary(m *dns.Msg) string {
	var data []string
	for _, rr := range m.Answer {
		data = append(data, dns.TypeToString[rr.Header().Rrtype]+" "+strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	slices.Sort(data)
	s := dns.RcodeToString[m.Rcode]
	if len(data) > 0 {
		s += " " + strings.Join(data, ", ")
	}
	for _, rr := range m.Ns {
		if rr.Header().Rrtype == dns.TypeSOA {
			s += " +SOA"
		}
	}
	return s
}

// expect polls until the answer to name/qtype over UDP and TCP is want (informers
// deliver objects a moment after they are written).
func expect(t *testing.T, name string, qtype uint16, want string) {
	t.Helper()
	for _, network := range []string{"udp", "tcp"} {
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			m, err := ask(network, name, qtype)
			if err != nil {
				return err
			}
			if got := summary(m); got != want {
				return fmt.Errorf("%s %s %s: %q, want %q", network, name, dns.TypeToString[qtype], got, want)
			}
			return nil
		})
	}
}

func TestKubeDNSService(t *testing.T) {
	cs := c.Clientset(t)
	// The server creates it in the background once admission serves Services.
	var svc *corev1.Service
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		var err error
		svc, err = cs.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
		return err
	})
	if svc.Spec.ClusterIP != dnsAddr || svc.Labels["k8s-app"] != "kube-dns" || svc.Annotations[agentdns.NodeLocalAnnotation] != "true" || svc.Spec.Selector != nil {
		t.Errorf("kube-dns: clusterIP %s (want %s), labels %v, annotations %v, selector %v", svc.Spec.ClusterIP, dnsAddr, svc.Labels, svc.Annotations, svc.Spec.Selector)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s/%d/%s", p.Name, p.Port, p.Protocol))
	}
	if strings.Join(ports, " ") != "dns/53/UDP dns-tcp/53/TCP metrics/9153/TCP" {
		t.Errorf("kube-dns ports %v", ports)
	}
	// The address is on the package's interface, as a /32.
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		ifc, err := net.InterfaceByName(dnsIface)
		if err != nil {
			return err
		}
		all, _ := ifc.Addrs()
		var addrs []string
		for _, a := range all {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
				addrs = append(addrs, a.String())
			}
		}
		if len(addrs) != 1 || addrs[0] != dnsAddr+"/32" {
			return fmt.Errorf("%s addresses %v, want %s/32", dnsIface, addrs, dnsAddr)
		}
		return nil
	})
}

// fixture: a ClusterIP Service backend (ports http 80→8080, dns 53/UDP), a headless
// Service web with two StatefulSet-like pods (hostname web-N, subdomain web), an
// ExternalName Service ext → www.example.test.
type fixture struct {
	ns, clusterIP string
	podIPs        map[string]string
}

func setup(t *testing.T, cs kubernetes.Interface) fixture {
	t.Helper()
	ctx := context.Background()
	ns := netharness.Namespace(t, cs, nil)
	backend := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "backend"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "backend"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
	}}
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 8080}},
	}}
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.test"}}
	f := fixture{ns: ns, podIPs: map[string]string{}}
	for _, s := range []*corev1.Service{backend, web, ext} {
		got, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Name == "backend" {
			f.clusterIP = got.Spec.ClusterIP
		}
	}
	for _, name := range []string{"web-0", "web-1"} {
		p := netharness.HTTPDPod(name, c.A.Name, map[string]string{"app": "web"})
		p.Spec.Hostname, p.Spec.Subdomain = name, "web"
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web-0", "web-1"} {
		p := netharness.WaitPod(t, cs, ns, name, 2*time.Minute, "Ready", netharness.PodReady)
		f.podIPs[name] = p.Status.PodIP
	}
	return f
}

func TestRecords(t *testing.T) {
	cs := c.Clientset(t)
	f := setup(t, cs)
	ns, ip0, ip1 := f.ns, f.podIPs["web-0"], f.podIPs["web-1"]
	zone := ns + ".svc.cluster.local."
	both := []string{"A " + ip0, "A " + ip1}
	slices.Sort(both)

	expect(t, "backend."+zone, dns.TypeA, "NOERROR A "+f.clusterIP)
	expect(t, "BACKEND."+strings.ToUpper(zone), dns.TypeA, "NOERROR A "+f.clusterIP)
	expect(t, "backend."+zone, dns.TypeAAAA, "NOERROR +SOA")
	expect(t, "nope."+zone, dns.TypeA, "NXDOMAIN +SOA")
	expect(t, "_http._tcp.backend."+zone, dns.TypeSRV, "NOERROR SRV 0 100 80 backend."+zone)
	expect(t, "_dns._udp.backend."+zone, dns.TypeSRV, "NOERROR SRV 0 100 53 backend."+zone)
	expect(t, "_http._udp.backend."+zone, dns.TypeSRV, "NXDOMAIN +SOA")
	expect(t, "web."+zone, dns.TypeA, "NOERROR "+strings.Join(both, ", "))
	expect(t, "web-0.web."+zone, dns.TypeA, "NOERROR A "+ip0)
	expect(t, "web-9.web."+zone, dns.TypeA, "NXDOMAIN +SOA")
	srv := []string{"SRV 0 50 8080 web-0.web." + zone, "SRV 0 50 8080 web-1.web." + zone}
	expect(t, "_http._tcp.web."+zone, dns.TypeSRV, "NOERROR "+strings.Join(srv, ", "))
	rev, _ := dns.ReverseAddr(f.clusterIP)
	expect(t, rev, dns.TypePTR, "NOERROR PTR backend."+zone)
	rev0, _ := dns.ReverseAddr(ip0)
	expect(t, rev0, dns.TypePTR, "NOERROR PTR web-0.web."+zone)
	expect(t, strings.ReplaceAll(ip1, ".", "-")+"."+ns+".pod.cluster.local.", dns.TypeA, "NOERROR A "+ip1)
	expect(t, "dns-version.cluster.local.", dns.TypeTXT, `NOERROR TXT "1.1.0"`)
	expect(t, ns+".svc.cluster.local.", dns.TypeA, "NOERROR +SOA")
	expect(t, "no-such-namespace.svc.cluster.local.", dns.TypeA, "NXDOMAIN +SOA")
	// ExternalName: the CNAME, and its target's address from upstream.
	expect(t, "ext."+zone, dns.TypeA, "NOERROR A 192.0.2.7, CNAME www.example.test.")

	// Upstream recursion with its cache, negative answers included: a second round of
	// the same questions does not reach the upstream server.
	expect(t, "www.example.test.", dns.TypeA, "NOERROR A 192.0.2.7")
	expect(t, "missing.example.test.", dns.TypeA, "NXDOMAIN +SOA")
	before := upstreamQueries.Load()
	for range 3 {
		expect(t, "www.example.test.", dns.TypeA, "NOERROR A 192.0.2.7")
		expect(t, "missing.example.test.", dns.TypeA, "NXDOMAIN +SOA")
	}
	if n := upstreamQueries.Load() - before; n != 0 {
		t.Errorf("cached names reached the upstream %d more times", n)
	}

	// A scaled-down headless Service: the gone pod's records go.
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	expect(t, "web."+zone, dns.TypeA, "NOERROR A "+ip0)
	expect(t, "web-1.web."+zone, dns.TypeA, "NXDOMAIN +SOA")
}

// TestPodResolves: pods get the DNS in their resolv.conf as the kubelet writes it
// (ClusterFirst; ClusterFirstWithHostNet for a hostNetwork pod), and a pod resolves
// Service, StatefulSet-pod and outside names with nslookup.
//
// The resolving pod runs in the host's network namespace: pods on the pod network have no
// route to the Service CIDR yet (internal/agent/cni writes no routes; see the report).
func TestPodResolves(t *testing.T) {
	cs := c.Clientset(t)
	f := setup(t, cs)
	ns := f.ns
	ctx := context.Background()
	podNet := netharness.BusyboxPod("podnet", c.A.Name, "sleep 3600")
	client := netharness.BusyboxPod("client", c.A.Name, "sleep 3600")
	client.Spec.HostNetwork, client.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
	for _, p := range []*corev1.Pod{podNet, client} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"podnet", "client"} {
		netharness.WaitPod(t, cs, ns, p, 2*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		out, err := c.Exec(t, ns, p, "cat", "/etc/resolv.conf")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "nameserver "+dnsAddr) || !strings.Contains(out, "search "+ns+".svc.cluster.local svc.cluster.local cluster.local") || !strings.Contains(out, "ndots:5") {
			t.Fatalf("pod %s resolv.conf:\n%s", p, out)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"backend." + ns + ".svc.cluster.local", f.clusterIP},
		{"web-0.web." + ns + ".svc.cluster.local", f.podIPs["web-0"]},
		{"www.example.test", "192.0.2.7"},
	} {
		servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
			out, err := c.Exec(t, ns, "client", "nslookup", "-type=a", tc.name)
			if err != nil {
				return err
			}
			if !strings.Contains(out, "Address: "+tc.want) && !strings.Contains(out, "Address 1: "+tc.want) {
				return fmt.Errorf("nslookup %s:\n%s", tc.name, out)
			}
			return nil
		})
	}
	out, err := c.Exec(t, ns, "client", "nslookup", "-type=a", "nope."+ns+".svc.cluster.local")
	if err == nil || !strings.Contains(out+err.Error(), "NXDOMAIN") {
		t.Errorf("nslookup of a missing Service: %v\n%s", err, out)
	}
	// Names are asked fully qualified: busybox's nslookup does not apply the search list,
	// and its wget and ping cannot resolve in this image (busybox-static is linked against
	// glibc, whose getaddrinfo needs NSS modules the image does not have).
}

func TestMetrics(t *testing.T) {
	if _, err := ask("udp", "kubernetes.default.svc.cluster.local.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(dnsAddr, "9153") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`coredns_dns_requests_total{family="1",proto="udp",server="dns://` + dnsHostPort + `",type="A",zone="cluster.local."}`,
		`coredns_dns_responses_total{plugin="",rcode="NOERROR",server="dns://` + dnsHostPort + `",zone="cluster.local."}`,
		`coredns_dns_request_duration_seconds_bucket{server="dns://` + dnsHostPort + `",type="A",zone="cluster.local.",le="+Inf"}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
