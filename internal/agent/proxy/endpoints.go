package proxy

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Bogus endpoint addresses. The API validates an EndpointSlice's addresses (an IPv4 slice
// holds IPv4 addresses, none unspecified, loopback or link-local), but what it stores can
// still be nothing a node should DNAT to: a multicast or reserved address, a Service's own
// ClusterIP (a loop), an IPv4-mapped IPv6 address, a legacy address with leading zeros, or
// anything stored before that validation. The proxy programs the slice's other endpoints,
// leaves those out, and says so once per revision of the slice with a Warning Event
// (ReasonIgnoredEndpoint) on it.

// ReasonIgnoredEndpoint is the reason of the Warning Event on an EndpointSlice some of
// whose addresses the proxy does not program.
const ReasonIgnoredEndpoint = "IgnoredEndpointAddress"

// ignoredEndpoint is an endpoint left out of a slice, and why.
type ignoredEndpoint struct {
	address, why string
}

// addressProblem says why the proxy does not DNAT to addr ("" when it may): addr must be a
// unicast IPv4 address in dotted-quad form outside the Service CIDR. Pure.
func addressProblem(addr string, serviceCIDR netip.Prefix) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "not an IP address in canonical form"
	}
	if !a.Is4() {
		return "not an IPv4 address"
	}
	b := a.As4()
	switch {
	case a.IsUnspecified() || b[0] == 0:
		return "in 0.0.0.0/8 (this network)"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case b[0] >= 240:
		return "a reserved or broadcast address (240.0.0.0/4)"
	case serviceCIDR.IsValid() && serviceCIDR.Contains(a):
		return fmt.Sprintf("in the Service CIDR %s (a Service's address, not a pod's)", serviceCIDR)
	}
	return ""
}

// bogusEndpoints are the endpoints of an IPv4 slice the proxy leaves out (the first
// address is the one it would program, as upstream's proxy); other address types are not
// this proxy's. Pure.
func bogusEndpoints(s *discoveryv1.EndpointSlice, serviceCIDR netip.Prefix) (ignored []ignoredEndpoint, keep []discoveryv1.Endpoint) {
	if s.AddressType != discoveryv1.AddressTypeIPv4 {
		return nil, s.Endpoints
	}
	for _, ep := range s.Endpoints {
		if len(ep.Addresses) == 0 {
			ignored = append(ignored, ignoredEndpoint{why: "no address"})
			continue
		}
		if why := addressProblem(ep.Addresses[0], serviceCIDR); why != "" {
			ignored = append(ignored, ignoredEndpoint{address: ep.Addresses[0], why: why})
			continue
		}
		keep = append(keep, ep)
	}
	return ignored, keep
}

// withoutBogus is s without its bogus endpoints (a copy when it had some; s itself
// otherwise), reporting them once per revision of s.
func (px *Proxier) withoutBogus(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	ignored, keep := bogusEndpoints(s, px.p.serviceCIDR)
	if len(ignored) == 0 {
		return s
	}
	key := s.Namespace + "/" + s.Name
	px.mu.Lock()
	report := px.warned[key] != s.ResourceVersion
	px.warned[key] = s.ResourceVersion
	px.mu.Unlock()
	if report {
		var parts []string
		for _, ig := range ignored {
			parts = append(parts, fmt.Sprintf("%q: %s", ig.address, ig.why))
		}
		msg := fmt.Sprintf("the Service proxy on node %s ignores %d endpoint(s) of this slice: %s", px.o.NodeName, len(ignored), strings.Join(parts, "; "))
		px.log.Warn("EndpointSlice endpoints ignored", "slice", key, "resourceVersion", s.ResourceVersion, "ignored", strings.Join(parts, "; "))
		if px.o.Recorder != nil {
			px.o.Recorder.Event(s, v1.EventTypeWarning, ReasonIgnoredEndpoint, msg)
		}
	}
	c := s.DeepCopy()
	c.Endpoints = keep
	return c
}
