package cli

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

func TestClusterControllerFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		noAlloc bool
	}{
		{nil, false},
		{[]string{"--allocate-node-cidrs"}, false},
		{[]string{"--allocate-node-cidrs=true"}, false},
		{[]string{"--allocate-node-cidrs=false"}, true},
	} {
		var o server.ClusterControllerOptions
		f := pflag.NewFlagSet("t", pflag.ContinueOnError)
		addClusterControllerFlags(f, &o)
		if err := f.Parse(append(tc.args, "--node-monitor-grace-period=7s", "--cluster-controllers=*,-ttl-controller")); err != nil {
			t.Fatal(err)
		}
		if o.NoNodeCIDRAllocation != tc.noAlloc {
			t.Errorf("%v: NoNodeCIDRAllocation %v, want %v", tc.args, o.NoNodeCIDRAllocation, tc.noAlloc)
		}
		if o.NodeMonitorGracePeriod != 7*time.Second || o.ClusterCIDR != "10.244.0.0/16" || o.TerminatedPodGCThreshold != 12500 ||
			len(o.ClusterControllers) != 2 || o.ClusterControllers[1] != "-ttl-controller" {
			t.Errorf("parsed %+v", o)
		}
	}
}
