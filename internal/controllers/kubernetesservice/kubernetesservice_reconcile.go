package kubernetesservice

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	netutils "k8s.io/utils/net"
)

const (
	// ServiceName is the Service, Endpoints and first EndpointSlice in default.
	ServiceName = "kubernetes"
	// PortName names the Service's and the endpoints' port.
	PortName = "https"
	// IdentityLabel and IdentityValue mark the server Leases, as upstream's apiserver
	// identity Leases (kubectl get lease -n kube-system -l apiserver.kubernetes.io/identity=kube-apiserver).
	IdentityLabel = "apiserver.kubernetes.io/identity"
	IdentityValue = "kube-apiserver"
	// AddressAnnotation on a server Lease is the address:port the server serves on
	// (upstream's annotation for the network location of an apiserver).
	AddressAnnotation = corev1.AnnotationPeerAdvertiseAddress
)

// Member is one live server: its endpoint address and secure port.
type Member struct {
	IP   string
	Port int32
}

// LeaseName is the name of a server's Lease in kube-system: "apiserver-" and a hash of
// its identity, as upstream names identity Leases (upstream hashes the host name alone;
// several Kube servers may share a host, so their identities include the address).
func LeaseName(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// Expired reports whether a Lease was last renewed more than its duration before now.
func Expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return !now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// memberOf reads a server Lease; ok is false for Leases of other apiservers (no address).
func memberOf(l *coordinationv1.Lease) (Member, bool) {
	host, port, err := net.SplitHostPort(l.Annotations[AddressAnnotation])
	if err != nil || l.Labels[IdentityLabel] != IdentityValue {
		return Member{}, false
	}
	ip := netutils.ParseIPSloppy(host)
	p, err := strconv.ParseInt(port, 10, 32)
	if ip == nil || err != nil || p <= 0 || p > 65535 {
		return Member{}, false
	}
	return Member{IP: ip.String(), Port: int32(p)}, true
}

// LiveMembers lists the servers whose Leases have not expired at now, sorted, without
// duplicates.
func LiveMembers(leases []coordinationv1.Lease, now time.Time) []Member {
	seen := map[Member]bool{}
	var out []Member
	for i := range leases {
		m, ok := memberOf(&leases[i])
		if !ok || Expired(&leases[i], now) || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IP != out[j].IP {
			return out[i].IP < out[j].IP
		}
		return out[i].Port < out[j].Port
	})
	return out
}

func endpointPort(port int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: PortName, Port: port, Protocol: corev1.ProtocolTCP}
}

// DesiredSubsets are the subsets of the kubernetes Endpoints: one subset per port, with
// the sorted addresses of the members on that port. Servers sharing one port (the usual
// case: one per host) share one subset, exactly as upstream's lease reconciler writes it;
// upstream's RepackSubsets would merge one host's several ports into one subset with the
// name "https" twice, which validation refuses.
func DesiredSubsets(members []Member) []corev1.EndpointSubset {
	byPort := map[int32][]string{}
	for _, m := range members {
		byPort[m.Port] = append(byPort[m.Port], m.IP)
	}
	return subsetsByPort(byPort)
}

func subsetsByPort(byPort map[int32][]string) []corev1.EndpointSubset {
	if len(byPort) == 0 {
		return nil
	}
	ports := make([]int32, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	subsets := make([]corev1.EndpointSubset, 0, len(ports))
	for _, p := range ports {
		ips := byPort[p]
		sort.Strings(ips)
		ss := corev1.EndpointSubset{Ports: []corev1.EndpointPort{endpointPort(p)}}
		for i, ip := range ips {
			if i == 0 || ip != ips[i-1] {
				ss.Addresses = append(ss.Addresses, corev1.EndpointAddress{IP: ip})
			}
		}
		subsets = append(subsets, ss)
	}
	return subsets
}

// canonicalSubsets brings subsets this controller wrote (or anyone changed) into
// DesiredSubsets' layout; ok is false when they hold anything else (other ports, not-ready
// addresses, references), which only a rewrite repairs.
func canonicalSubsets(subsets []corev1.EndpointSubset) (_ []corev1.EndpointSubset, ok bool) {
	byPort := map[int32][]string{}
	for _, ss := range subsets {
		if len(ss.Ports) != 1 || ss.Ports[0] != endpointPort(ss.Ports[0].Port) || len(ss.NotReadyAddresses) != 0 {
			return nil, false
		}
		for _, a := range ss.Addresses {
			if a != (corev1.EndpointAddress{IP: a.IP}) {
				return nil, false
			}
			byPort[ss.Ports[0].Port] = append(byPort[ss.Ports[0].Port], a.IP)
		}
	}
	return subsetsByPort(byPort), true
}

// sliceGroup is the members one EndpointSlice holds: one address type, one port.
type sliceGroup struct {
	addressType discoveryv1.AddressType
	port        int32
}

// DesiredSlices are the EndpointSlices of the kubernetes Service. An EndpointSlice has one
// port list for all its endpoints, so members are grouped by address type and port: the
// first group (IPv4 before IPv6, then the lowest port) is the slice "kubernetes", as
// upstream writes it; servers on another port (several servers on one host) go in
// "kubernetes-<ipv4|ipv6>-<port>". With no member, "kubernetes" is empty, as upstream
// leaves it when the last server stops. family is the address type of the empty slice.
func DesiredSlices(members []Member, family discoveryv1.AddressType) []*discoveryv1.EndpointSlice {
	groups := map[sliceGroup][]string{}
	for _, m := range members {
		t := discoveryv1.AddressTypeIPv4
		if netutils.IsIPv6String(m.IP) {
			t = discoveryv1.AddressTypeIPv6
		}
		g := sliceGroup{t, m.Port}
		groups[g] = append(groups[g], m.IP)
	}
	keys := make([]sliceGroup, 0, len(groups))
	for g := range groups {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].addressType != keys[j].addressType {
			return keys[i].addressType == discoveryv1.AddressTypeIPv4
		}
		return keys[i].port < keys[j].port
	})
	if len(keys) == 0 {
		return []*discoveryv1.EndpointSlice{newSlice(ServiceName, family)}
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(keys))
	for i, g := range keys {
		name := ServiceName
		if i > 0 {
			name = fmt.Sprintf("%s-%s-%d", ServiceName, strings.ToLower(string(g.addressType)), g.port)
		}
		s := newSlice(name, g.addressType)
		port, portName, proto := g.port, PortName, corev1.ProtocolTCP
		s.Ports = []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}}
		ips := groups[g]
		sort.Strings(ips)
		for _, ip := range ips {
			ready := true
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		out = append(out, s)
	}
	return out
}

func newSlice(name string, t discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: metav1.NamespaceDefault,
			Labels:    map[string]string{discoveryv1.LabelServiceName: ServiceName},
		},
		AddressType: t,
	}
}

// OwnSlice says an EndpointSlice of the kubernetes Service is one this controller writes
// (and so may delete when no longer desired).
func OwnSlice(name string) bool {
	return name == ServiceName || strings.HasPrefix(name, ServiceName+"-ipv4-") || strings.HasPrefix(name, ServiceName+"-ipv6-")
}

// SliceUpToDate says cur already holds what want says (upstream's comparison: endpoints,
// ports and labels; the address type cannot change in place).
func SliceUpToDate(cur, want *discoveryv1.EndpointSlice) bool {
	return apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
		apiequality.Semantic.DeepEqual(cur.Labels, want.Labels)
}

// UpdateEndpoints makes e hold subsets and the skip-mirror label (the EndpointSlice
// mirroring controller must leave it alone: the slices are written here), and reports
// whether it changed.
func UpdateEndpoints(e *corev1.Endpoints, subsets []corev1.EndpointSubset) bool {
	changed := false
	if e.Labels[discoveryv1.LabelSkipMirror] != "true" {
		if e.Labels == nil {
			e.Labels = map[string]string{}
		}
		e.Labels[discoveryv1.LabelSkipMirror] = "true"
		changed = true
	}
	if cur, ok := canonicalSubsets(e.Subsets); !ok || !apiequality.Semantic.DeepEqual(cur, subsets) {
		e.Subsets = nil
		for i := range subsets {
			e.Subsets = append(e.Subsets, *subsets[i].DeepCopy())
		}
		changed = true
	}
	return changed
}

// DesiredService is the default/kubernetes Service as upstream creates it: cluster IP the
// first address of the range, port 443 named https to the servers' secure port, no selector.
func DesiredService(clusterIP net.IP, servicePort, targetPort int32) *corev1.Service {
	singleStack := corev1.IPFamilyPolicySingleStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ServiceName,
			Namespace: metav1.NamespaceDefault,
			Labels:    map[string]string{"provider": "kubernetes", "component": "apiserver"},
		},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name:       PortName,
				Protocol:   corev1.ProtocolTCP,
				Port:       servicePort,
				TargetPort: intstr.FromInt32(targetPort),
			}},
			ClusterIP:       clusterIP.String(),
			IPFamilyPolicy:  &singleStack,
			SessionAffinity: corev1.ServiceAffinityNone,
			Type:            corev1.ServiceTypeClusterIP,
		},
	}
}
