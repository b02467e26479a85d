package proxy

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestKernelScale programs 1,000 Services x 10 endpoints in one transaction (the first
// sync after a start), then changes one endpoint of each of 100 Services (one sync).
func TestKernelScale(t *testing.T) {
	inNetns(t)
	px, err := New(Options{Client: fake.NewClientset(), NodeName: node, NodeIP: "10.1.0.1", Table: "kt-scale",
		ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	const services, endpoints = 1000, 10
	eps := func(i, gen int) []ep {
		var out []ep
		for e := 0; e < endpoints; e++ {
			host := e + 1
			if e == 0 {
				host = 100 + gen
			}
			out = append(out, readyOn(fmt.Sprintf("10.250.%d.%d", i%250, host), "b"))
		}
		return out
	}
	for i := 0; i < services; i++ {
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		px.OnServiceAdd(svcObj(fmt.Sprintf("s%d", i), func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip} }))
		px.OnEndpointSliceAdd(sliceObj(fmt.Sprintf("s%d", i), eps(i, 0)...))
	}
	start := time.Now()
	if err := px.sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync of %d Services x %d endpoints: %v, %d chains", services, endpoints, time.Since(start), len(px.prog.chains))
	if want := services * 2; len(px.prog.chains) != want { // int- and svc- per port; endpoints are DNAT map elements
		t.Errorf("%d chains, want %d", len(px.prog.chains), want)
	}
	for i := 0; i < 100; i++ {
		px.OnEndpointSliceUpdate(nil, sliceObj(fmt.Sprintf("s%d", i), eps(i, 1)...))
	}
	start = time.Now()
	if err := px.sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("sync of 100 changed Services: %v", time.Since(start))
	if got, err := fetch("10.96.0.1:80"); err == nil {
		t.Errorf("an endpoint-less address answered %q", got)
	}
}
