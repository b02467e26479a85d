package cli

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addClusterControllerFlags adds the flags of the cluster controllers (internal/controllers/{endpointslice,nodelifecycle,nodeipam,resourcequota,…}),
// named and defaulted as kube-controller-manager's.
func addClusterControllerFlags(f *pflag.FlagSet, o *server.ClusterControllerOptions) {
	f.StringSliceVar(&o.ClusterControllers, "cluster-controllers", []string{"*"},
		"The cluster controllers to run, kube-controller-manager's --controllers syntax: '*' all, 'name' on, '-name' off. Names: "+
			strings.Join(server.ClusterControllerNames(), ", "))
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "CIDR range of pods in the cluster (one, or two of different families); nodes' spec.podCIDRs are allocated from it")
	f.IntVar(&o.NodeCIDRMaskSize, "node-cidr-mask-size", 0, "Mask size of node pod CIDRs in a single-stack cluster (default 24 for IPv4, 64 for IPv6)")
	f.IntVar(&o.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", 0, "Mask size of IPv4 node pod CIDRs in a dual-stack cluster (default 24)")
	f.IntVar(&o.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", 0, "Mask size of IPv6 node pod CIDRs in a dual-stack cluster (default 64)")
	f.Var((*inverseBool)(&o.NoNodeCIDRAllocation), "allocate-node-cidrs", "Allocate pod CIDRs to nodes from --cluster-cidr (default true)")
	f.Lookup("allocate-node-cidrs").NoOptDefVal = "true"
	f.DurationVar(&o.NodeMonitorPeriod, "node-monitor-period", 0, "How often node health is checked (default 5s)")
	f.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", 0, "How long a node may go without a heartbeat before it is marked Unknown (default 50s)")
	f.DurationVar(&o.NodeStartupGracePeriod, "node-startup-grace-period", 0, "How long a starting node may go without posting Ready before it is marked Unknown (default 1m0s)")
	f.Float32Var(&o.NodeEvictionRate, "node-eviction-rate", 0, "Nodes per second tainted for eviction in a healthy zone (default 0.1)")
	f.Float32Var(&o.SecondaryNodeEvictionRate, "secondary-node-eviction-rate", 0, "Nodes per second tainted for eviction in an unhealthy zone (default 0.01)")
	f.Int32Var(&o.LargeClusterSizeThreshold, "large-cluster-size-threshold", 0, "Nodes above which a zone counts as large for eviction (default 50)")
	f.Float32Var(&o.UnhealthyZoneThreshold, "unhealthy-zone-threshold", 0, "Fraction of not-ready nodes (at least 3) that makes a zone unhealthy (default 0.55)")
	f.IntVar(&o.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", 12500, "Terminated pods kept before the pod garbage collector deletes the oldest")
	f.IntVar(&o.ConcurrentServiceEndpointSyncs, "concurrent-service-endpoint-syncs", 5, "Services the EndpointSlice controller syncs at once")
	f.IntVar(&o.ConcurrentEndpointSyncs, "concurrent-endpoint-syncs", 5, "Services the Endpoints controller syncs at once")
	f.Int32Var(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", 100, "Endpoints per EndpointSlice")
	f.DurationVar(&o.EndpointSliceUpdatesBatchPeriod, "endpointslice-updates-batch-period", 0, "Time pod changes are batched before a Service's EndpointSlices are updated")
	f.DurationVar(&o.ResourceQuotaSyncPeriod, "resource-quota-sync-period", 0, "How often every ResourceQuota's usage is recomputed in full (default 5m0s)")
	f.DurationVar(&o.HPASyncPeriod, "horizontal-pod-autoscaler-sync-period", 0, "How often HorizontalPodAutoscalers are synced (default 15s)")
	f.DurationVar(&o.PVClaimBinderSyncPeriod, "pvclaimbinder-sync-period", 0, "How often PersistentVolumes and claims are synced (default 15s)")
}

// inverseBool is a bool flag stored negated (a default-true flag over a default-false field).
type inverseBool bool

func (b *inverseBool) String() string { return strconv.FormatBool(!bool(*b)) }
func (b *inverseBool) Type() string   { return "bool" }
func (b *inverseBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b = inverseBool(!v)
	return nil
}
