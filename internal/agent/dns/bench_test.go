package dns

import (
	"context"
	"fmt"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkHandle is one cached Service name answered, packed (no sockets).
func BenchmarkHandle(b *testing.B) {
	idx := NewIndex()
	idx.SetNamespace("bench")
	for i := range 1000 {
		idx.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}})
	}
	m, _ := NewMetrics(prometheus.NewRegistry())
	h := &Handler{Resolver: &Resolver{Zone: "cluster.local", Index: idx}, Metrics: m}
	reqs := make([][]byte, 1000)
	for i := range reqs {
		q := new(dns.Msg)
		q.SetQuestion(fmt.Sprintf("svc-%d.bench.svc.cluster.local.", i), dns.TypeA)
		reqs[i], _ = q.Pack()
	}
	b.ReportAllocs()
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		req := new(dns.Msg)
		if err := req.Unpack(reqs[i%1000]); err != nil {
			b.Fatal(err)
		}
		resp, _ := h.Handle(ctx, req, true)
		if _, err := resp.Pack(); err != nil {
			b.Fatal(err)
		}
	}
}
