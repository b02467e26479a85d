package proxy

import (
	"net/netip"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8sproxy "k8s.io/kubernetes/pkg/proxy"
	"k8s.io/utils/ptr"
)

const node = "node-a"

type ep struct {
	ip, node                    string
	ready, serving, terminating bool
}

func readyOn(ip, n string) ep { return ep{ip: ip, node: n, ready: true, serving: true} }

func svcObj(name string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
	}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func sliceObj(svc string, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)}})
	}
	return s
}

// trackers runs the objects through upstream's change trackers, as the Proxier does.
func trackers(svcs []*v1.Service, slices []*discoveryv1.EndpointSlice) (k8sproxy.ServicePortMap, k8sproxy.EndpointsMap) {
	st := k8sproxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	et := k8sproxy.NewEndpointsChangeTracker(v1.IPv4Protocol, node, nil, nil)
	for _, s := range svcs {
		st.Update(nil, orNil(s))
	}
	for _, s := range slices {
		et.EndpointSliceUpdate(s, false)
	}
	sm, em := k8sproxy.ServicePortMap{}, k8sproxy.EndpointsMap{}
	sm.Update(st)
	em.Update(et)
	return sm, em
}

func ips(eps []k8sproxy.Endpoint) string {
	var out []string
	for _, e := range eps {
		out = append(out, e.IP())
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestPlanPort(t *testing.T) {
	local := func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal) }
	extLocal := func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyTypeLocal
	}
	cases := []struct {
		name                   string
		svc                    func(*v1.Service)
		eps                    []ep
		cluster, local         string
		hasInternal, hasExtern bool
		internal, external     string // filter verdicts, "" none
	}{
		{name: "three ready", eps: []ep{readyOn("10.1.0.1", node), readyOn("10.1.0.2", "b"), readyOn("10.1.0.3", "b")},
			cluster: "10.1.0.1,10.1.0.2,10.1.0.3", hasInternal: true, hasExtern: true},
		{name: "no endpoints rejects", internal: "goto reject-chain", external: "goto reject-chain"},
		{name: "terminating ones are not used while a ready one exists",
			eps:     []ep{readyOn("10.1.0.1", "b"), {ip: "10.1.0.2", node: "b", serving: true, terminating: true}},
			cluster: "10.1.0.1", hasInternal: true, hasExtern: true},
		{name: "serving terminating endpoints are the fallback",
			eps:     []ep{{ip: "10.1.0.2", node: "b", serving: true, terminating: true}, {ip: "10.1.0.3", node: "b", terminating: true}},
			cluster: "10.1.0.2", hasInternal: true, hasExtern: true},
		{name: "not ready, not serving: rejects", eps: []ep{{ip: "10.1.0.2", node: "b"}},
			internal: "goto reject-chain", external: "goto reject-chain"},
		{name: "internalTrafficPolicy Local with only remote endpoints drops", svc: local,
			eps: []ep{readyOn("10.1.0.2", "b")}, internal: "drop", hasExtern: true},
		{name: "internalTrafficPolicy Local uses the local endpoint only", svc: local,
			eps: []ep{readyOn("10.1.0.1", node), readyOn("10.1.0.2", "b")}, local: "10.1.0.1", hasInternal: true, hasExtern: true},
		{name: "externalTrafficPolicy Local: local endpoints for external, all for internal", svc: extLocal,
			eps:     []ep{readyOn("10.1.0.1", node), readyOn("10.1.0.2", "b")},
			cluster: "10.1.0.1,10.1.0.2", local: "10.1.0.1", hasInternal: true, hasExtern: true},
		{name: "externalTrafficPolicy Local without a local endpoint drops external traffic", svc: extLocal,
			eps: []ep{readyOn("10.1.0.2", "b")}, cluster: "10.1.0.2", hasInternal: true, external: "drop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sm, em := trackers([]*v1.Service{svcObj("web", tc.svc)}, []*discoveryv1.EndpointSlice{sliceObj("web", tc.eps...)})
			if len(sm) != 1 {
				t.Fatalf("%d service ports", len(sm))
			}
			for name, svc := range sm {
				p := planPort(svc, em[name], node)
				if got := ips(p.cluster); got != tc.cluster {
					t.Errorf("cluster endpoints %q, want %q", got, tc.cluster)
				}
				if got := ips(p.local); got != tc.local {
					t.Errorf("local endpoints %q, want %q", got, tc.local)
				}
				if p.hasInternal != tc.hasInternal || p.hasExternal != tc.hasExtern {
					t.Errorf("hasInternal %v hasExternal %v, want %v %v", p.hasInternal, p.hasExternal, tc.hasInternal, tc.hasExtern)
				}
				str := func(v *verdict) string {
					if v == nil {
						return ""
					}
					return v.String()
				}
				if str(p.internalFilter) != tc.internal || str(p.externalFilter) != tc.external {
					t.Errorf("filters %q %q, want %q %q", str(p.internalFilter), str(p.externalFilter), tc.internal, tc.external)
				}
			}
		})
	}
}

func mustParse(s string) parsed {
	return parsed{nodeIP: netip.MustParseAddr("192.0.2.2"), serviceCIDR: netip.MustParsePrefix("10.96.0.0/12"), clusterCIDR: netip.MustParsePrefix(s)}
}

func TestBuildDesired(t *testing.T) {
	o := mustParse("10.244.0.0/16")
	svcs := []*v1.Service{
		svcObj("web", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalIPs = []string{"203.0.113.7"}
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}),
		svcObj("empty", func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"} }),
		svcObj("headless", func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} }),
		svcObj("dns", func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.12", []string{"10.96.0.12"}
			s.Annotations = map[string]string{SkipAnnotation: "true"}
		}),
	}
	slices := []*discoveryv1.EndpointSlice{
		sliceObj("web", readyOn("10.244.0.5", node), readyOn("10.244.1.5", "b")),
		sliceObj("headless", readyOn("10.244.0.6", node)),
		sliceObj("dns", readyOn("10.244.0.7", node)),
	}
	sm, em := trackers(svcs, slices)
	d := buildDesired(sm, em, node, o)

	if len(d.clusterIPs) != 2 || !d.clusterIPs[netip.MustParseAddr("10.96.0.10")] || !d.clusterIPs[netip.MustParseAddr("10.96.0.11")] {
		t.Errorf("clusterIPs %v: want web's and empty's only (not headless, not the node-local DNS)", d.clusterIPs)
	}
	web := ipKey{ip: netip.MustParseAddr("10.96.0.10"), proto: 6, port: 80}
	v, ok := d.serviceIPs[web]
	if !ok || !strings.HasPrefix(v.chain, "int-") {
		t.Fatalf("service-ips[web] = %v", v)
	}
	intRules := chainContent(d.chains[v.chain])
	if !strings.Contains(intRules, "ip saddr != 10.244.0.0/16 meta mark") || !strings.Contains(intRules, "goto svc-") {
		t.Errorf("int chain:\n%s", intRules)
	}
	svcChain := "svc-" + strings.TrimPrefix(v.chain, "int-")
	svcRules := d.chains[svcChain]
	last := svcRules[len(svcRules)-1]
	if last.kind != rNumgen || len(last.chains) != 2 {
		t.Fatalf("svc chain:\n%s", chainContent(svcRules))
	}
	if n := strings.Count(chainContent(svcRules), "ip saddr @aff-"); n != 2 {
		t.Errorf("svc chain has %d affinity lookups, want 2:\n%s", n, chainContent(svcRules))
	}
	for _, ec := range last.chains {
		rs := chainContent(d.chains[ec])
		if !strings.Contains(rs, "meta mark set") || !strings.Contains(rs, "update @aff-") || !strings.Contains(rs, "dnat ip to 10.244.") {
			t.Errorf("endpoint chain %s:\n%s", ec, rs)
		}
	}
	if len(d.affinity) != 2 {
		t.Errorf("affinity sets %v", d.affinity)
	}
	for s, timeout := range d.affinity {
		if timeout != 60 {
			t.Errorf("affinity set %s timeout %d", s, timeout)
		}
	}
	ext := ipKey{ip: netip.MustParseAddr("203.0.113.7"), proto: 6, port: 80}
	if v := d.serviceIPs[ext]; !strings.HasPrefix(v.chain, "ext-") {
		t.Errorf("service-ips[externalIP] = %v", v)
	}
	if v := d.nodePorts[portKey{proto: 6, port: 30080}]; !strings.HasPrefix(v.chain, "ext-") {
		t.Errorf("service-nodeports[30080] = %v", v)
	} else if rs := chainContent(d.chains[v.chain]); !strings.HasPrefix(rs, "meta mark set") || !strings.Contains(rs, "goto svc-") {
		t.Errorf("ext chain:\n%s", rs)
	}
	empty := ipKey{ip: netip.MustParseAddr("10.96.0.11"), proto: 6, port: 80}
	if v, ok := d.noEndpointIPs[empty]; !ok || v.kind != vReject {
		t.Errorf("no-endpoint-services[empty] = %v, %v", v, ok)
	}
	if _, ok := d.serviceIPs[empty]; ok {
		t.Errorf("empty service has a service-ips element")
	}
	if len(d.report) != 2 {
		t.Errorf("report %+v", d.report)
	}

	// The same input gives the same chains (names and content): nothing to re-program.
	d2 := buildDesired(sm, em, node, o)
	for name, rules := range d.chains {
		if chainContent(d2.chains[name]) != chainContent(rules) {
			t.Errorf("chain %s differs between two builds", name)
		}
	}
}

// TestBuildDesiredLoopbackAPIServer: with an API server on loopback only (Options.APIServer),
// the kubernetes Service's ClusterIP port https is DNATed to it, with or without listed
// endpoints; other Services, other ports and a Service of that name elsewhere keep their
// endpoints; without the option the listed endpoint is used, as upstream.
func TestBuildDesiredLoopbackAPIServer(t *testing.T) {
	kubernetes := func(ns string, ports ...v1.ServicePort) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes"}, Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"}, Ports: ports}}
	}
	https := v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}
	metrics := v1.ServicePort{Name: "metrics", Port: 8443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}
	slice := func(ns string) *discoveryv1.EndpointSlice {
		s := sliceObj("kubernetes", ep{ip: "192.0.2.2", ready: true, serving: true})
		s.Namespace = ns
		s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(v1.ProtocolTCP)},
			{Name: ptr.To("metrics"), Port: ptr.To[int32](6443), Protocol: ptr.To(v1.ProtocolTCP)}}
		return s
	}
	other := kubernetes("other", https)
	other.Spec.ClusterIP, other.Spec.ClusterIPs = "10.96.0.2", []string{"10.96.0.2"}
	key := func(ip string, port uint16) ipKey { return ipKey{ip: netip.MustParseAddr(ip), proto: 6, port: port} }
	loopback := mustParse("10.244.0.0/16")
	loopback.apiServer = netip.MustParseAddrPort("127.0.0.1:6443")

	for _, tc := range []struct {
		name   string
		o      parsed
		slices []*discoveryv1.EndpointSlice
		want   map[ipKey]string // ClusterIP port → its int- chain's content ("reject": no-endpoint element)
	}{
		{"loopback API server", loopback, []*discoveryv1.EndpointSlice{slice("default"), slice("other")}, map[ipKey]string{
			key("10.96.0.1", 443):  "meta l4proto 6 dnat ip to 127.0.0.1:6443\n",
			key("10.96.0.1", 8443): "ip saddr != 10.244.0.0/16 meta mark set mark or 0x4000\ngoto svc-",
			key("10.96.0.2", 443):  "ip saddr != 10.244.0.0/16 meta mark set mark or 0x4000\ngoto svc-",
		}},
		{"loopback API server, no endpoints listed", loopback, nil, map[ipKey]string{
			key("10.96.0.1", 443):  "meta l4proto 6 dnat ip to 127.0.0.1:6443\n",
			key("10.96.0.1", 8443): "reject",
			key("10.96.0.2", 443):  "reject",
		}},
		{"API server on the network (upstream)", mustParse("10.244.0.0/16"), []*discoveryv1.EndpointSlice{slice("default")}, map[ipKey]string{
			key("10.96.0.1", 443):  "ip saddr != 10.244.0.0/16 meta mark set mark or 0x4000\ngoto svc-",
			key("10.96.0.1", 8443): "ip saddr != 10.244.0.0/16 meta mark set mark or 0x4000\ngoto svc-",
			key("10.96.0.2", 443):  "reject",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm, em := trackers([]*v1.Service{kubernetes("default", https, metrics), other}, tc.slices)
			d := buildDesired(sm, em, node, tc.o)
			for k, want := range tc.want {
				if want == "reject" {
					if v, ok := d.noEndpointIPs[k]; !ok || v.kind != vReject {
						t.Errorf("%v: no-endpoint element %v, %v; want reject", k, v, ok)
					}
					continue
				}
				v, ok := d.serviceIPs[k]
				if !ok {
					t.Errorf("%v: no service-ips element", k)
					continue
				}
				if got := chainContent(d.chains[v.chain]); !strings.HasPrefix(got, want) {
					t.Errorf("%v: chain %s:\n%s\nwant it to start with:\n%s", k, v.chain, got, want)
				}
			}
			if !d.clusterIPs[netip.MustParseAddr("10.96.0.1")] {
				t.Errorf("no lo route wanted for 10.96.0.1: the node's own processes could not reach it")
			}
		})
	}
}
