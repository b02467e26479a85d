package servicealloc

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

func TestParseRanges(t *testing.T) {
	for _, tc := range []struct {
		name, cidrs, ports string
		want               []string
		wantPorts          string
		wantIP             string
		err                string
	}{
		{name: "defaults", want: []string{"10.96.0.0/12"}, wantPorts: "30000-32767", wantIP: "10.96.0.1"},
		{name: "upstream default", cidrs: "10.0.0.0/24", want: []string{"10.0.0.0/24"}, wantPorts: "30000-32767", wantIP: "10.0.0.1"},
		{name: "dual stack", cidrs: "10.0.0.0/16,fd00::/108", ports: "20000-20100", want: []string{"10.0.0.0/16", "fd00::/108"}, wantPorts: "20000-20100", wantIP: "10.0.0.1"},
		{name: "ipv6 primary", cidrs: "fd00::/112", want: []string{"fd00::/112"}, wantPorts: "30000-32767", wantIP: "fd00::1"},
		{name: "host bits masked", cidrs: "10.1.2.3/16", want: []string{"10.1.0.0/16"}, wantPorts: "30000-32767", wantIP: "10.1.0.1"},
		{name: "three", cidrs: "10.0.0.0/16,fd00::/108,10.1.0.0/16", err: "--service-cluster-ip-range must not contain more than two entries"},
		{name: "same family", cidrs: "10.0.0.0/16,10.1.0.0/16", err: "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family"},
		{name: "not a cidr", cidrs: "10.0.0.1", err: `--service-cluster-ip-range[0] "10.0.0.1" is not a valid CIDR`},
		{name: "too small", cidrs: "10.0.0.0/30", err: "--service-cluster-ip-range[0] 10.0.0.0/30: the service cluster IP range must be at least 8 IP addresses"},
		{name: "ipv6 too large", cidrs: "fd00::/48", err: "--service-cluster-ip-range[0] fd00::/48: shortest allowed prefix length for an IPv6 service CIDR is 64"},
		{name: "one port", ports: "30000", want: []string{"10.96.0.0/12"}, wantPorts: "30000-30000", wantIP: "10.96.0.1"},
		{name: "bad ports", ports: "30000-x", err: `--service-node-port-range "30000-x": strconv.Atoi: parsing "x": invalid syntax`},
		{name: "reversed ports", ports: "32000-31000", err: `--service-node-port-range "32000-31000": end port cannot be less than start port: 32000-31000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRanges(tc.cidrs, tc.ports)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range r.ServiceCIDRs {
				got = append(got, c.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("CIDRs %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("CIDRs %v, want %v", got, tc.want)
				}
			}
			if r.NodePorts.String() != tc.wantPorts {
				t.Errorf("ports %s, want %s", r.NodePorts.String(), tc.wantPorts)
			}
			if ip := r.KubernetesServiceIP().String(); ip != tc.wantIP {
				t.Errorf("kubernetes Service IP %s, want %s", ip, tc.wantIP)
			}
		})
	}
}

// The allocator relies on upstream's gates as v1.37 locks them: IPAddress objects only, no
// bitmap written beside them.
func TestFeatureGates(t *testing.T) {
	for _, f := range []featuregate.Feature{features.MultiCIDRServiceAllocator, features.DisableAllocatorDualWrite} {
		if !utilfeature.DefaultFeatureGate.Enabled(f) {
			t.Errorf("feature %s is off", f)
		}
	}
}
