package servicesnet

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/agent/proxy"
	"kubeos.dev/kube/test/netharness"
)

// TestBogusEndpointSlice: a Service without a selector whose hand-made EndpointSlice holds
// one real pod and addresses the API stores but no node should DNAT to (a multicast
// address, an address in the Service CIDR, a class E one) serves from the pod alone, from
// both nodes, and each node's proxy says what it ignored with a Warning Event on the slice.
func TestBogusEndpointSlice(t *testing.T) {
	cs := c.Clientset(t)
	ctx := ctxT(t, 3*time.Minute)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "good", c.B.Name, "good")
	pod := waitReady(t, cs, ns, "good")["good"]
	svc := service(t, cs, ns, "mixed", "", func(s *corev1.Service) { s.Spec.Selector = nil })
	inServiceCIDR := netip.MustParsePrefix(c.ServiceCIDR).Addr().Next().Next().Next().String()
	bogus := []string{"239.1.2.3", inServiceCIDR, "240.0.0.9"}
	eps := []discoveryv1.Endpoint{{Addresses: []string{pod.Status.PodIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	for _, a := range bogus {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "mixed-1", Labels: map[string]string{discoveryv1.LabelServiceName: "mixed"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API refused the slice: %v", err)
	}
	url := fmt.Sprintf("http://%s/", svc.Spec.ClusterIP)
	// With a bogus endpoint programmed, about three requests in four would fail.
	for _, n := range c.Nodes() {
		eventually(t, "ten answers from the good endpoint alone on "+n.Name, func() error {
			for i := 0; i < 10; i++ {
				body, err := getFrom(ctx, n, url)
				if err != nil {
					return err
				}
				if body != "good" {
					return fmt.Errorf("answer %q", body)
				}
			}
			return nil
		})
	}
	eventually(t, "a Warning Event on the slice from each node", func() error {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		from := map[string]bool{}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind != "EndpointSlice" || e.InvolvedObject.Name != slice.Name || e.Type != corev1.EventTypeWarning || e.Reason != proxy.ReasonIgnoredEndpoint {
				continue
			}
			for _, a := range bogus {
				if !strings.Contains(e.Message, a) {
					return fmt.Errorf("event %q does not name %s", e.Message, a)
				}
			}
			if strings.Contains(e.Message, pod.Status.PodIP+"\"") {
				return fmt.Errorf("event %q names the good endpoint", e.Message)
			}
			from[e.Source.Host] = true
		}
		if !from[c.A.Name] || !from[c.B.Name] {
			return fmt.Errorf("%s Warnings from %v, want both nodes", proxy.ReasonIgnoredEndpoint, from)
		}
		return nil
	})
}
