package proxy

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

func TestAddressProblem(t *testing.T) {
	cidr := netip.MustParsePrefix("10.96.0.0/12")
	for _, tc := range []struct {
		addr, want string // want: a word of the reason, "" for none
	}{
		{"10.244.1.5", ""},
		{"192.168.0.1", ""},
		{"172.16.0.1", ""},
		{"10.95.255.255", ""},
		{"10.96.0.10", "Service CIDR"},
		{"10.111.255.254", "Service CIDR"},
		{"127.0.0.1", "loopback"},
		{"127.5.6.7", "loopback"},
		{"0.0.0.0", "0.0.0.0/8"},
		{"0.1.2.3", "0.0.0.0/8"},
		{"169.254.169.254", "link-local"},
		{"224.0.0.251", "multicast"},
		{"239.1.2.3", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"010.244.001.005", "canonical"},
		{"::ffff:10.244.1.5", "IPv4"},
		{"fd00::1", "IPv4"},
		{"", "canonical"},
		{"pod.example", "canonical"},
		{"10.244.1.5/32", "canonical"},
	} {
		got := addressProblem(tc.addr, cidr)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("addressProblem(%q) = %q, want one saying %q", tc.addr, got, tc.want)
		}
	}
}

func TestBogusEndpoints(t *testing.T) {
	cidr := netip.MustParsePrefix("10.96.0.0/12")
	ep := func(addrs ...string) discoveryv1.Endpoint { return discoveryv1.Endpoint{Addresses: addrs} }
	for _, tc := range []struct {
		name    string
		typ     discoveryv1.AddressType
		eps     []discoveryv1.Endpoint
		ignored []string
		kept    int
	}{
		{"all good", discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ep("10.244.0.2"), ep("10.244.0.3")}, nil, 2},
		{"one loopback", discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ep("10.244.0.2"), ep("127.0.0.1")}, []string{"127.0.0.1"}, 1},
		{"a ClusterIP and a multicast", discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ep("10.96.0.1"), ep("239.0.0.1"), ep("10.244.0.9")}, []string{"10.96.0.1", "239.0.0.1"}, 1},
		{"the first address counts", discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ep("127.0.0.1", "10.244.0.2")}, []string{"127.0.0.1"}, 0},
		{"no address", discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ep()}, []string{""}, 0},
		{"IPv6 slices are not this proxy's", discoveryv1.AddressTypeIPv6, []discoveryv1.Endpoint{ep("::1")}, nil, 1},
		{"FQDN slices are not this proxy's", discoveryv1.AddressTypeFQDN, []discoveryv1.Endpoint{ep("example.com")}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &discoveryv1.EndpointSlice{AddressType: tc.typ, Endpoints: tc.eps}
			ignored, keep := bogusEndpoints(s, cidr)
			var got []string
			for _, ig := range ignored {
				got = append(got, ig.address)
				if ig.why == "" {
					t.Errorf("%q ignored without a reason", ig.address)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.ignored, ",") || len(keep) != tc.kept {
				t.Errorf("ignored %q, kept %d; want %q, %d", got, len(keep), tc.ignored, tc.kept)
			}
		})
	}
}

// TestBogusReportedOncePerRevision: the Warning Event on a slice with ignored endpoints
// comes once per resourceVersion (an informer's relist delivers the same revision again),
// and the slice handed on keeps only the good endpoints.
func TestBogusReportedOncePerRevision(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	px := &Proxier{o: Options{NodeName: "n1", Recorder: rec}, p: parsed{serviceCIDR: netip.MustParsePrefix("10.96.0.0/12")},
		log: slog.New(slog.DiscardHandler), warned: map[string]string{}}
	slice := func(rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s1", ResourceVersion: rv},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}}, {Addresses: []string{"239.1.2.3"}}}}
	}
	for i, rv := range []string{"5", "5", "6", "6", "6"} {
		s := slice(rv)
		got := px.withoutBogus(s)
		if len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "10.244.0.7" || len(s.Endpoints) != 2 {
			t.Fatalf("delivery %d: handed on %+v (the informer's copy now %+v)", i, got.Endpoints, s.Endpoints)
		}
	}
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	if len(events) != 2 || !strings.Contains(events[0], "Warning "+ReasonIgnoredEndpoint) || !strings.Contains(events[0], "239.1.2.3") {
		t.Errorf("events %q, want one Warning %s per revision (2)", events, ReasonIgnoredEndpoint)
	}
	good := slice("7")
	good.Endpoints = good.Endpoints[:1]
	if px.withoutBogus(good) != good {
		t.Error("a slice without bogus endpoints is copied")
	}
}
