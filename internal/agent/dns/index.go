package dns

import (
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Index is the in-memory view the answers come from. Its Set and Delete methods take
// the API objects as informers deliver them; lookups take a read lock and copy nothing.
// The zero value is not usable: call NewIndex.
type Index struct {
	mu         sync.RWMutex
	namespaces map[string]struct{}
	services   map[string]*service                              // ns/name
	objects    map[string]*corev1.Service                       // ns/name
	slices     map[string]map[string]*discoveryv1.EndpointSlice // service ns/name -> slice name
	sliceOwner map[string]string                                // slice ns/name -> service ns/name
	ptr        map[netip.Addr][]ptrName
	serial     uint32
}

// ptrName is one PTR target: the name relative to the zone ("web.shop.svc") and the
// service key that contributed it.
type ptrName struct{ name, owner string }

// service is one Service's records, recomputed from the Service and its slices whenever
// either changes.
type service struct {
	name, namespace string
	externalName    string // ExternalName Services: the CNAME target (fully qualified)
	headless        bool
	clusterIPs      []netip.Addr
	ports           []port     // the Service's ports (SRV for ClusterIP Services)
	endpoints       []endpoint // ready (or published) endpoint addresses
}

type port struct {
	name, proto string // proto lower case: tcp, udp, sctp
	port        uint16
}

type endpoint struct {
	addr     netip.Addr
	hostname string // the endpoint's hostname, else its address with dashes
	ports    []port
}

// NewIndex makes an empty index.
func NewIndex() *Index {
	return &Index{
		namespaces: map[string]struct{}{}, services: map[string]*service{}, objects: map[string]*corev1.Service{},
		slices: map[string]map[string]*discoveryv1.EndpointSlice{}, sliceOwner: map[string]string{},
		ptr: map[netip.Addr][]ptrName{},
	}
}

// Serial changes with every update (the SOA serial).
func (x *Index) Serial() uint32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.serial
}

// SetNamespace records that namespace ns exists.
func (x *Index) SetNamespace(ns string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.namespaces[strings.ToLower(ns)] = struct{}{}
	x.serial++
}

// DeleteNamespace forgets namespace ns.
func (x *Index) DeleteNamespace(ns string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.namespaces, strings.ToLower(ns))
	x.serial++
}

// SetService adds or replaces a Service.
func (x *Index) SetService(svc *corev1.Service) {
	key := lowerKey(svc.Namespace, svc.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.objects[key] = svc
	x.rebuild(key)
}

// DeleteService removes the Service ns/name.
func (x *Index) DeleteService(ns, name string) {
	key := lowerKey(ns, name)
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.objects, key)
	x.rebuild(key)
}

// SetEndpointSlice adds or replaces an EndpointSlice (its kubernetes.io/service-name
// label names the Service; a slice without one is ignored).
func (x *Index) SetEndpointSlice(es *discoveryv1.EndpointSlice) {
	sliceKey := lowerKey(es.Namespace, es.Name)
	owner := ""
	if n := es.Labels[discoveryv1.LabelServiceName]; n != "" {
		owner = lowerKey(es.Namespace, n)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.sliceOwner[sliceKey]; ok && old != owner {
		x.removeSlice(sliceKey)
	}
	if owner == "" {
		return
	}
	if x.slices[owner] == nil {
		x.slices[owner] = map[string]*discoveryv1.EndpointSlice{}
	}
	x.slices[owner][sliceKey] = es
	x.sliceOwner[sliceKey] = owner
	x.rebuild(owner)
}

// DeleteEndpointSlice removes the EndpointSlice ns/name.
func (x *Index) DeleteEndpointSlice(ns, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSlice(lowerKey(ns, name))
}

func (x *Index) removeSlice(sliceKey string) {
	owner, ok := x.sliceOwner[sliceKey]
	if !ok {
		return
	}
	delete(x.sliceOwner, sliceKey)
	delete(x.slices[owner], sliceKey)
	if len(x.slices[owner]) == 0 {
		delete(x.slices, owner)
	}
	x.rebuild(owner)
}

// rebuild recomputes the records of the Service key (x.mu held).
func (x *Index) rebuild(key string) {
	x.serial++
	if old := x.services[key]; old != nil {
		for _, a := range old.addrs() {
			x.ptr[a] = slices.DeleteFunc(x.ptr[a], func(p ptrName) bool { return p.owner == key })
			if len(x.ptr[a]) == 0 {
				delete(x.ptr, a)
			}
		}
		delete(x.services, key)
	}
	obj := x.objects[key]
	if obj == nil {
		return
	}
	s := buildService(obj, x.slices[key])
	x.services[key] = s
	base := s.name + "." + s.namespace + ".svc"
	for _, a := range s.clusterIPs {
		x.ptr[a] = append(x.ptr[a], ptrName{name: base, owner: key})
	}
	if s.headless {
		for _, e := range s.endpoints {
			x.ptr[e.addr] = append(x.ptr[e.addr], ptrName{name: e.hostname + "." + base, owner: key})
		}
	}
}

// addrs are the addresses the service contributed PTR records for.
func (s *service) addrs() []netip.Addr {
	out := slices.Clone(s.clusterIPs)
	if s.headless {
		for _, e := range s.endpoints {
			out = append(out, e.addr)
		}
	}
	return out
}

// buildService derives the records of svc from it and its slices (pure).
func buildService(svc *corev1.Service, sl map[string]*discoveryv1.EndpointSlice) *service {
	s := &service{name: strings.ToLower(svc.Name), namespace: strings.ToLower(svc.Namespace)}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if svc.Spec.ExternalName != "" {
			s.externalName = strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, ".")) + "."
		}
		return s
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if ip == corev1.ClusterIPNone {
			s.headless = true
			continue
		}
		if a, err := netip.ParseAddr(ip); err == nil {
			s.clusterIPs = append(s.clusterIPs, a.Unmap())
		}
	}
	if len(ips) == 0 {
		s.headless = true
	}
	for _, p := range svc.Spec.Ports {
		s.ports = append(s.ports, port{name: strings.ToLower(p.Name), proto: protoName(p.Protocol), port: uint16(p.Port)})
	}
	names := make([]string, 0, len(sl))
	for n := range sl {
		names = append(names, n)
	}
	slices.Sort(names)
	seen := map[netip.Addr]bool{}
	for _, n := range names {
		es := sl[n]
		var ports []port
		for _, p := range es.Ports {
			if p.Port == nil {
				continue
			}
			pp := port{port: uint16(*p.Port), proto: "tcp"}
			if p.Name != nil {
				pp.name = strings.ToLower(*p.Name)
			}
			if p.Protocol != nil {
				pp.proto = protoName(*p.Protocol)
			}
			ports = append(ports, pp)
		}
		for _, ep := range es.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			for _, ip := range ep.Addresses {
				a, err := netip.ParseAddr(ip)
				if err != nil || seen[a.Unmap()] {
					continue
				}
				a = a.Unmap()
				if (es.AddressType == discoveryv1.AddressTypeIPv4 && !a.Is4()) || (es.AddressType == discoveryv1.AddressTypeIPv6 && !a.Is6()) {
					continue
				}
				seen[a] = true
				h := ""
				if ep.Hostname != nil && validLabel(strings.ToLower(*ep.Hostname)) {
					h = strings.ToLower(*ep.Hostname)
				} else {
					h = dashed(a)
				}
				s.endpoints = append(s.endpoints, endpoint{addr: a, hostname: h, ports: ports})
			}
		}
	}
	return s
}

// validLabel: a DNS-1123 label (what the API allows for hostnames and names).
func validLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(s)-1) {
			return false
		}
	}
	return true
}

// dashed is an address with its dots (or colons) as dashes, CoreDNS's endpoint name.
func dashed(a netip.Addr) string {
	s := a.String()
	if a.Is4() {
		return strings.ReplaceAll(s, ".", "-")
	}
	return strings.ReplaceAll(s, ":", "-")
}

func protoName(p corev1.Protocol) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(string(p))
}

func lowerKey(ns, name string) string { return strings.ToLower(ns) + "/" + strings.ToLower(name) }

// Addresses is the ClusterIPs of the Service ns/name (nil when unknown).
func (x *Index) Addresses(ns, name string) []netip.Addr {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if s := x.services[lowerKey(ns, name)]; s != nil {
		return slices.Clone(s.clusterIPs)
	}
	return nil
}
