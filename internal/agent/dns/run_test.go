package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"kubeos.dev/kube/internal/server/servertest/slot"
)

// TestRunFollowsService: Run answers on the kube-dns Service's ClusterIP from the API
// and moves when it changes (loopback addresses, so no link is needed).
func TestRunFollowsService(t *testing.T) {
	n := slot.Must()
	first, second := fmt.Sprintf("127.54.%d.1", n), fmt.Sprintf("127.54.%d.2", n)
	l, err := net.ListenPacket("udp", first+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	// Only names of the zone are asked: the upstream is never queried.
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dnsSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace, Name: ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: first, ClusterIPs: []string{first}}}
	cs := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}, dnsSvc)
	ready := make(chan netip.Addr, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Client: cs, Port: port, MetricsPort: -1, ResolvConf: resolv, Ready: func(a netip.Addr) { ready <- a }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	wait := func(want string) {
		t.Helper()
		select {
		case a := <-ready:
			if a.String() != want {
				t.Fatalf("answering on %s, want %s", a, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("not answering on %s within 30 s", want)
		case err := <-done:
			t.Fatalf("Run stopped: %v", err)
		}
	}
	ask := func(addr string) (*dns.Msg, error) {
		c := &dns.Client{Timeout: 2 * time.Second}
		req := new(dns.Msg)
		req.SetQuestion("kube-dns.kube-system.svc.cluster.local.", dns.TypeA)
		r, _, err := c.Exchange(req, net.JoinHostPort(addr, strconv.Itoa(port)))
		return r, err
	}
	wait(first)
	if r, err := ask(first); err != nil || summaryOf(r) != "NOERROR | A "+first {
		t.Fatalf("on %s: %v %v", first, r, err)
	}
	dnsSvc.Spec.ClusterIP, dnsSvc.Spec.ClusterIPs = second, []string{second}
	if _, err := cs.CoreV1().Services(ServiceNamespace).Update(ctx, dnsSvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(second)
	if r, err := ask(second); err != nil || summaryOf(r) != "NOERROR | A "+second {
		t.Fatalf("on %s: %v %v", second, r, err)
	}
	if _, err := ask(first); err == nil {
		t.Errorf("still answering on the old address %s", first)
	}
}

func summaryOf(m *dns.Msg) string {
	if m == nil {
		return "<nil>"
	}
	return render(m)
}
