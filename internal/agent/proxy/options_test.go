package proxy

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// TestProbe: a failing Options.Probe makes New fail with ErrNoNFTables and the probe's
// error, before New touches the kernel; bad options are refused before the probe runs.
func TestProbe(t *testing.T) {
	refused := errors.New("simulated: protocol not supported")
	for _, tc := range []struct {
		name      string
		o         Options
		probed    bool
		noNFT     bool
		errSubstr string
	}{
		{"probe fails", Options{Client: fake.NewClientset(), NodeName: "n", ServiceCIDR: "10.96.0.0/12"}, true, true, "protocol not supported"},
		{"bad options first", Options{Client: fake.NewClientset(), NodeName: "n", ServiceCIDR: "nonsense"}, false, false, "Service CIDR"},
		{"no client", Options{NodeName: "n", ServiceCIDR: "10.96.0.0/12"}, false, false, "client"},
		{"API server not loopback", Options{Client: fake.NewClientset(), NodeName: "n", ServiceCIDR: "10.96.0.0/12", APIServer: "10.1.2.3:6443"}, false, false, "loopback"},
		{"API server IPv6", Options{Client: fake.NewClientset(), NodeName: "n", ServiceCIDR: "10.96.0.0/12", APIServer: "[::1]:6443"}, false, false, "loopback"},
		{"API server without port", Options{Client: fake.NewClientset(), NodeName: "n", ServiceCIDR: "10.96.0.0/12", APIServer: "127.0.0.1"}, false, false, "loopback"},
		{"bad bridge", Options{Client: fake.NewClientset(), NodeName: "n", ServiceCIDR: "10.96.0.0/12", APIServer: "127.0.0.1:6443", Bridge: "../all"}, false, false, "bridge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probed := false
			tc.o.Probe = func() error { probed = true; return refused }
			px, err := New(tc.o)
			if px != nil || err == nil {
				t.Fatalf("New = %v, %v; want an error", px, err)
			}
			if probed != tc.probed || errors.Is(err, ErrNoNFTables) != tc.noNFT || !strings.Contains(err.Error(), tc.errSubstr) {
				t.Errorf("New: %v (probed %v); want probed %v, ErrNoNFTables %v, saying %q", err, probed, tc.probed, tc.noNFT, tc.errSubstr)
			}
		})
	}
}
