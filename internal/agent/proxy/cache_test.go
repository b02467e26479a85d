package proxy

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	k8sproxy "k8s.io/kubernetes/pkg/proxy"
	"k8s.io/utils/ptr"
)

// TestCachedEqualsFresh: through a sequence of Service and EndpointSlice changes (shared
// endpoints and ClusterIPs, affinity on and off, Services going), the cache's incrementally
// merged content always equals a fresh buildDesired of the same maps.
func TestCachedEqualsFresh(t *testing.T) {
	o := mustParse("10.244.0.0/16")
	st := k8sproxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	et := k8sproxy.NewEndpointsChangeTracker(v1.IPv4Protocol, node, nil, nil)
	sm, em := k8sproxy.ServicePortMap{}, k8sproxy.EndpointsMap{}
	cache := newPortCache()
	svc := func(name, ip string, affinity bool) *v1.Service {
		return svcObj(name, func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "b", Port: 81, Protocol: v1.ProtocolTCP})
			if affinity {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
			}
		})
	}
	cur := map[string]*v1.Service{}
	setSvc := func(s *v1.Service) { st.Update(cur[s.Name], s); cur[s.Name] = s }
	delSvc := func(name string) { st.Update(cur[name], nil); delete(cur, name) }
	slice := func(name string, ips ...string) *discoveryv1.EndpointSlice {
		var eps []ep
		for _, ip := range ips {
			eps = append(eps, readyOn(ip, "b"))
		}
		return sliceObj(name, eps...)
	}
	steps := []func(){
		func() {
			setSvc(svc("a", "10.96.0.1", false))
			setSvc(svc("b", "10.96.0.2", false))
			et.EndpointSliceUpdate(slice("a", "10.244.1.1", "10.244.1.2"), false)
			et.EndpointSliceUpdate(slice("b", "10.244.1.2"), false) // an endpoint shared with a
		},
		func() { et.EndpointSliceUpdate(slice("a", "10.244.1.1", "10.244.1.3"), false) },
		func() { setSvc(svc("a", "10.96.0.1", true)) },
		func() { et.EndpointSliceUpdate(slice("b", "10.244.1.4"), false) },
		func() { delSvc("a") },
		func() { setSvc(svc("c", "10.96.0.3", false)); et.EndpointSliceUpdate(slice("c"), false) },
		func() { et.EndpointSliceUpdate(slice("b"), true) },
		func() { delSvc("b"); delSvc("c") },
	}
	for i, step := range steps {
		step()
		sm.Update(st)
		em.Update(et)
		got := buildDesiredCached(sm, em, node, o, cache)
		want := buildDesired(sm, em, node, o)
		for what, eq := range map[string]bool{
			"chains":     maps.Equal(got.contents, want.contents) && len(got.chains) == len(want.chains),
			"affinity":   maps.Equal(got.affinity, want.affinity),
			"dnatMaps":   maps.EqualFunc(got.dnatMaps, want.dnatMaps, slices.Equal),
			"hairpin":    maps.Equal(got.hairpin, want.hairpin),
			"clusterIPs": maps.Equal(got.clusterIPs, want.clusterIPs),
			"serviceIPs": maps.Equal(got.serviceIPs, want.serviceIPs),
			"noEndpoint": maps.Equal(got.noEndpointIPs, want.noEndpointIPs),
			"nodePorts":  maps.Equal(got.nodePorts, want.nodePorts),
			"report":     (len(got.report) == 0 && len(want.report) == 0) || reflect.DeepEqual(got.report, want.report),
		} {
			if !eq {
				t.Errorf("step %d: %s differ from a fresh build", i, what)
			}
		}
		if i == 0 && !got.hairpin[mustAddr("10.244.1.2")] {
			t.Errorf("step 0: shared endpoint not in @hairpin")
		}
	}
	if n := len(cache.d.chains) + len(cache.d.hairpin) + len(cache.d.clusterIPs) + len(cache.hairpinRefs) + len(cache.ports); n != 0 {
		t.Errorf("everything gone, %d entries left in the cache", n)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
