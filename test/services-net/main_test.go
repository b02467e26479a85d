// Package servicesnet tests the agent's Service proxy as users meet it: real busybox pods
// on two nodes (the in-process agent on the host, a `kube agent` in its own network
// namespace; test/netharness), Services in front of them, probes from pods, from each
// node and through kubectl 1.33. shop_test.go is issue 19's "Done when" as one scenario
// (cluster DNS, Services, NodePort, port-forward and NetworkPolicy together). dns_test.go
// tests the node-local cluster DNS on node A: the kube-dns Service and its interface, the
// records (queries straight to the listener with miekg/dns's client), upstream recursion
// and its cache, real pods resolving with nslookup and wget, and the metrics.
package servicesnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/agent"
	agentdns "kubeos.dev/kube/internal/agent/dns"
	"kubeos.dev/kube/internal/agent/netpol"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
	"kubeos.dev/kube/test/netharness"
)

var c *netharness.Cluster

// Node A runs the cluster DNS and NetworkPolicy too (node B, a `kube agent` with default
// flags, runs both in its own namespace): on an interface and in an nftables table of this
// package's, removed at the end. Node A's DNS answers on the kube-dns Service's ClusterIP
// (dnsAddr, the tenth address of the Service CIDR); no query leaves the machine: node A's
// resolv.conf names an upstream server of this package (miekg/dns on 127.53.N.1:53, N the
// test slot), authoritative for example.test.
var (
	dnsIface    = fmt.Sprintf("ks%d", os.Getpid())
	netpolTable = fmt.Sprintf("ksn%d", os.Getpid())
	// dnsAddr is the kube-dns ClusterIP (host:53 in dnsHostPort).
	dnsAddr, dnsHostPort string
	// upstreamQueries counts what reached the upstream server.
	upstreamQueries atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	upstream := fmt.Sprintf("127.53.%d.1", slot.Must())
	stop, err := startUpstream(net.JoinHostPort(upstream, "53"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream DNS:", err)
		return 1
	}
	defer stop()
	dir, err := os.MkdirTemp("", "kube-svcnet-test-")
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
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		agentdns.RemoveLink(ctx, dnsIface)
		if err := netpol.Cleanup(ctx, netpolTable); err != nil {
			fmt.Fprintln(os.Stderr, "netpol cleanup:", err)
		}
	}()
	return netharness.Run(m, netharness.Options{Name: "svc", SecondNode: true, Server: func(so *server.Options) {
		ip, err := server.ClusterDNSAddress("", so.ServiceClusterIPRange)
		if err != nil {
			panic(err)
		}
		dnsAddr, dnsHostPort = ip, net.JoinHostPort(ip, "53")
		so.AgentResolvConf = resolv
		so.AgentDNS = agent.DNSOptions{Enabled: true, Interface: dnsIface}
		so.AgentClusterDNS = []string{ip}
		so.AgentNetworkPolicy = agent.NetworkPolicyOptions{Enabled: true, Table: netpolTable}
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

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// cgiScript serves on 8080: / the pod's name, /cgi-bin/ip the client's address.
const cgiScript = `mkdir -p /www/cgi-bin && hostname > /www/index.html && ` +
	`printf '#!/bin/sh\necho Content-Type: text/plain\necho\necho $REMOTE_ADDR\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && ` +
	`exec httpd -f -p 8080 -h /www`

// backend is a Ready httpd pod on node labelled app=label.
func backend(t *testing.T, cs kubernetes.Interface, ns, name, node, label string) *corev1.Pod {
	t.Helper()
	p := netharness.HTTPDPod(name, node, map[string]string{"app": label})
	p.Spec.Containers[0].Command = []string{"sh", "-c", cgiScript}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return nil
}

func waitReady(t *testing.T, cs kubernetes.Interface, ns string, names ...string) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	for _, n := range names {
		out[n] = netharness.WaitPod(t, cs, ns, n, 2*time.Minute, "Ready", netharness.PodReady)
	}
	return out
}

// client is a pod that sleeps, for probes by exec.
func client(t *testing.T, cs kubernetes.Interface, ns, name, node string) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), netharness.BusyboxPod(name, node, "exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	netharness.WaitPod(t, cs, ns, name, 2*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

func service(t *testing.T, cs kubernetes.Interface, ns, name, label string, mutate func(*corev1.Service)) *corev1.Service {
	t.Helper()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": label},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}
	if mutate != nil {
		mutate(s)
	}
	s, err := cs.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var httpc = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// get is a GET from the host (node A's network namespace).
func get(url string) (string, error) {
	resp, err := httpc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// getFrom is a GET from node's network namespace (curl; exit status 7 is "connection
// refused").
func getFrom(ctx context.Context, node netharness.Node, url string) (string, error) {
	out, err := node.Command(ctx, "curl", "-sS", "-m", "3", url).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("curl %s from %s: %w: %s", url, node.Name, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// podGet is the shell command a pod runs for a GET (busybox wget; its own -T crashes this
// busybox build, so timeout bounds it).
func podGet(url string) string { return "timeout 5 wget -q -O- " + url }

// getFromPod is a GET from a pod (kubectl exec … wget).
func getFromPod(t *testing.T, ns, pod, url string) (string, error) {
	out, err := c.Exec(t, ns, pod, "sh", "-c", podGet(url))
	return strings.TrimSpace(out), err
}

// eventually retries f until it succeeds (2 minutes at most).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	servertest.Eventually(t, 2*time.Minute, 300*time.Millisecond, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// refused says err is a refused TCP connect.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err == nil {
		conn.Close()
	}
	return err
}
