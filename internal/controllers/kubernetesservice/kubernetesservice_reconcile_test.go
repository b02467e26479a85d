package kubernetesservice

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func lease(name, addr string, renewed time.Time, seconds int32) coordinationv1.Lease {
	rt := metav1.NewMicroTime(renewed)
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system",
			Labels:      map[string]string{IdentityLabel: IdentityValue},
			Annotations: map[string]string{AddressAnnotation: addr}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &rt, LeaseDurationSeconds: ptr.To(seconds)},
	}
}

func TestLiveMembers(t *testing.T) {
	other := lease("apiserver-x", "10.0.0.9:6443", t0, 15)
	other.Labels[IdentityLabel] = "kube-controller-manager"
	noDuration := lease("apiserver-n", "10.0.0.8:6443", t0, 15)
	noDuration.Spec.LeaseDurationSeconds = nil
	for _, tc := range []struct {
		name   string
		leases []coordinationv1.Lease
		want   []Member
	}{
		{name: "none"},
		{name: "one live", leases: []coordinationv1.Lease{lease("a", "10.0.0.1:6443", t0.Add(-5*time.Second), 15)}, want: []Member{{"10.0.0.1", 6443}}},
		{name: "expired exactly at its duration", leases: []coordinationv1.Lease{lease("a", "10.0.0.1:6443", t0.Add(-15*time.Second), 15)}},
		{name: "sorted, duplicates dropped", leases: []coordinationv1.Lease{
			lease("c", "10.0.0.2:6443", t0, 15), lease("a", "10.0.0.1:6444", t0, 15),
			lease("b", "10.0.0.1:6443", t0, 15), lease("d", "10.0.0.2:6443", t0, 15),
		}, want: []Member{{"10.0.0.1", 6443}, {"10.0.0.1", 6444}, {"10.0.0.2", 6443}}},
		{name: "ipv6 normalised", leases: []coordinationv1.Lease{lease("a", "[fd00:0::1]:6443", t0, 15)}, want: []Member{{"fd00::1", 6443}}},
		{name: "other components, bad addresses and no duration ignored", leases: []coordinationv1.Lease{
			other, noDuration, lease("p", "10.0.0.1", t0, 15), lease("q", "host:6443", t0, 15), lease("r", "10.0.0.1:0", t0, 15), lease("s", "10.0.0.1:70000", t0, 15),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LiveMembers(tc.leases, t0)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestDesiredSubsets(t *testing.T) {
	port := func(p int32) []corev1.EndpointPort { return []corev1.EndpointPort{endpointPort(p)} }
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		members []Member
		want    []corev1.EndpointSubset
	}{
		{name: "none"},
		{name: "one port, as upstream", members: []Member{{"10.0.0.2", 6443}, {"10.0.0.1", 6443}},
			want: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: port(6443)}}},
		{name: "one host, several ports", members: []Member{{"10.0.0.1", 6443}, {"10.0.0.1", 6444}},
			want: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: port(6443)}, {Addresses: addrs("10.0.0.1"), Ports: port(6444)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DesiredSubsets(tc.members); !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDesiredSlices(t *testing.T) {
	type slice struct {
		name, addressType string
		port              int32 // 0: no ports
		ips               []string
	}
	for _, tc := range []struct {
		name    string
		members []Member
		want    []slice
	}{
		{name: "none: one empty slice", want: []slice{{name: "kubernetes", addressType: "IPv4"}}},
		{name: "one port", members: []Member{{"10.0.0.2", 6443}, {"10.0.0.1", 6443}},
			want: []slice{{"kubernetes", "IPv4", 6443, []string{"10.0.0.1", "10.0.0.2"}}}},
		{name: "one host, several ports", members: []Member{{"10.0.0.1", 6445}, {"10.0.0.1", 6443}, {"10.0.0.1", 6444}},
			want: []slice{{"kubernetes", "IPv4", 6443, []string{"10.0.0.1"}}, {"kubernetes-ipv4-6444", "IPv4", 6444, []string{"10.0.0.1"}}, {"kubernetes-ipv4-6445", "IPv4", 6445, []string{"10.0.0.1"}}}},
		{name: "ipv6 only is the kubernetes slice", members: []Member{{"fd00::1", 6443}},
			want: []slice{{"kubernetes", "IPv6", 6443, []string{"fd00::1"}}}},
		{name: "mixed families: IPv4 first", members: []Member{{"fd00::1", 6443}, {"10.0.0.1", 6443}},
			want: []slice{{"kubernetes", "IPv4", 6443, []string{"10.0.0.1"}}, {"kubernetes-ipv6-6443", "IPv6", 6443, []string{"fd00::1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DesiredSlices(tc.members, discoveryv1.AddressTypeIPv4)
			if len(got) != len(tc.want) {
				t.Fatalf("%d slices, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Name != w.name || string(g.AddressType) != w.addressType || g.Namespace != "default" {
					t.Errorf("slice %d: %s/%s %s, want %s %s", i, g.Namespace, g.Name, g.AddressType, w.name, w.addressType)
				}
				if len(g.Labels) != 1 || g.Labels[discoveryv1.LabelServiceName] != "kubernetes" {
					t.Errorf("slice %d labels %v", i, g.Labels)
				}
				if !OwnSlice(g.Name) {
					t.Errorf("slice %s not recognised as own", g.Name)
				}
				if w.port == 0 {
					if len(g.Ports) != 0 || len(g.Endpoints) != 0 {
						t.Errorf("empty slice has %v %v", g.Ports, g.Endpoints)
					}
					continue
				}
				if len(g.Ports) != 1 || *g.Ports[0].Port != w.port || *g.Ports[0].Name != "https" || *g.Ports[0].Protocol != corev1.ProtocolTCP {
					t.Errorf("slice %d ports %+v", i, g.Ports)
				}
				if len(g.Endpoints) != len(w.ips) {
					t.Fatalf("slice %d endpoints %+v, want %v", i, g.Endpoints, w.ips)
				}
				for j, ip := range w.ips {
					e := g.Endpoints[j]
					if len(e.Addresses) != 1 || e.Addresses[0] != ip || e.Conditions.Ready == nil || !*e.Conditions.Ready {
						t.Errorf("slice %d endpoint %d %+v, want %s ready", i, j, e, ip)
					}
				}
			}
		})
	}
	if OwnSlice("kubernetes-abcde") || OwnSlice("other") {
		t.Error("a slice another controller writes is taken as own")
	}
}

func TestUpdateEndpoints(t *testing.T) {
	want := DesiredSubsets([]Member{{"10.0.0.1", 6443}})
	e := &corev1.Endpoints{}
	if !UpdateEndpoints(e, want) || e.Labels[discoveryv1.LabelSkipMirror] != "true" {
		t.Fatalf("first update: %+v", e)
	}
	if UpdateEndpoints(e, want) {
		t.Fatal("an up-to-date Endpoints was changed")
	}
	// The same addresses in another order are the same Endpoints.
	two := DesiredSubsets([]Member{{"10.0.0.1", 6443}, {"10.0.0.2", 6443}})
	e.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}, {IP: "10.0.0.1"}}, Ports: two[0].Ports}}
	if UpdateEndpoints(e, two) {
		t.Fatal("reordered addresses counted as a change")
	}
	// Anything else in the subsets (a not-ready address, a second port) is rewritten.
	e.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "10.0.0.3"}}
	if !UpdateEndpoints(e, two) || len(e.Subsets[0].NotReadyAddresses) != 0 {
		t.Fatalf("foreign subset kept: %+v", e.Subsets)
	}
	e.Subsets[0].Ports = append(e.Subsets[0].Ports, corev1.EndpointPort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP})
	if !UpdateEndpoints(e, two) || len(e.Subsets[0].Ports) != 1 {
		t.Fatalf("foreign port kept: %+v", e.Subsets)
	}
	if !UpdateEndpoints(e, nil) || len(e.Subsets) != 0 {
		t.Fatalf("removing the last server: %+v", e.Subsets)
	}
}

func TestLeaseName(t *testing.T) {
	a, b := LeaseName("host_127.0.0.1:6443"), LeaseName("host_127.0.0.1:6444")
	if a == b || a != LeaseName("host_127.0.0.1:6443") || len(a) != len("apiserver-")+26 {
		t.Fatalf("lease names %q %q", a, b)
	}
}

func TestPublicAddress(t *testing.T) {
	if ip, err := PublicAddress("10.1.2.3", "127.0.0.1"); err != nil || ip.String() != "10.1.2.3" {
		t.Fatalf("advertise address: %v %v", ip, err)
	}
	if ip, err := PublicAddress("", "10.1.2.4"); err != nil || ip.String() != "10.1.2.4" {
		t.Fatalf("bind address: %v %v", ip, err)
	}
	// Loopback or wildcard: the host's interface address, never loopback.
	for _, bind := range []string{"127.0.0.1", "0.0.0.0", ""} {
		ip, err := PublicAddress("", bind)
		if err == nil && (ip.IsLoopback() || ip.IsUnspecified()) {
			t.Fatalf("bind %q: listed as %v", bind, ip)
		}
	}
}
