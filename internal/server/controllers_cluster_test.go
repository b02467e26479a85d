package server

import "testing"

func TestClusterControllerEnabled(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want bool
	}{
		{nil, true},
		{[]string{"*"}, true},
		{[]string{"*", "-x"}, false},
		{[]string{"-x", "*"}, false},
		{[]string{"y"}, false},
		{[]string{"x"}, true},
		{[]string{"-y", "*"}, true},
		{[]string{"-y"}, false},
	} {
		if got := clusterControllerEnabled("x", tc.list); got != tc.want {
			t.Errorf("clusterControllerEnabled(x, %q) = %v, want %v", tc.list, got, tc.want)
		}
	}
}

func TestClusterControllerOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o  ClusterControllerOptions
		ok bool
	}{
		{ClusterControllerOptions{}, true},
		{ClusterControllerOptions{ClusterControllers: []string{"*", "-endpointslice-controller"}}, true},
		{ClusterControllerOptions{ClusterControllers: []string{"endpointslice"}}, false},
		{ClusterControllerOptions{ClusterCIDR: "10.0.0.0/8", NodeCIDRMaskSize: 16}, true},
		{ClusterControllerOptions{ClusterCIDR: "nope"}, false},
		{ClusterControllerOptions{ClusterCIDR: "nope", NoNodeCIDRAllocation: true}, true},
		{ClusterControllerOptions{NodeMonitorGracePeriod: -1}, false},
		{ClusterControllerOptions{MaxEndpointsPerSlice: 1001}, false},
	} {
		if err := tc.o.validate(); (err == nil) != tc.ok {
			t.Errorf("validate(%+v) = %v, want ok %v", tc.o, err, tc.ok)
		}
	}
}
