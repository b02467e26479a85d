package server

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/controllers/bootstrapsigner"
	"kubeos.dev/kube/internal/controllers/endpoints"
	"kubeos.dev/kube/internal/controllers/endpointslice"
	"kubeos.dev/kube/internal/controllers/endpointslicemirroring"
	"kubeos.dev/kube/internal/controllers/ephemeral"
	"kubeos.dev/kube/internal/controllers/nodeipam"
	"kubeos.dev/kube/internal/controllers/nodelifecycle"
	"kubeos.dev/kube/internal/controllers/persistentvolume"
	"kubeos.dev/kube/internal/controllers/podautoscaler"
	"kubeos.dev/kube/internal/controllers/podgc"
	"kubeos.dev/kube/internal/controllers/pvcprotection"
	"kubeos.dev/kube/internal/controllers/pvprotection"
	"kubeos.dev/kube/internal/controllers/resourcequota"
	"kubeos.dev/kube/internal/controllers/storageversionmigration"
	"kubeos.dev/kube/internal/controllers/tainteviction"
	"kubeos.dev/kube/internal/controllers/tokencleaner"
	"kubeos.dev/kube/internal/controllers/ttl"
	"kubeos.dev/kube/internal/servicealloc"
)

// ClusterControllerOptions configure the cluster controllers (internal/controllers/{endpointslice,
// endpointslicemirroring, endpoints, nodelifecycle, tainteviction, nodeipam, podgc,
// resourcequota, persistentvolume, pvcprotection, pvprotection, podautoscaler,
// bootstrapsigner, tokencleaner, ttl, ephemeral, storageversionmigration}). Zero values take kube-controller-manager's
// defaults.
type ClusterControllerOptions struct {
	// ClusterControllers is --cluster-controllers, kube-controller-manager's --controllers
	// syntax over the cluster controllers' names: "*" all (the default), "name" on,
	// "-name" off. Empty means "*".
	ClusterControllers []string
	// ClusterCIDR is --cluster-cidr, the pod network node blocks come from (one CIDR or two
	// of different families). Default nodeipam.DefaultClusterCIDR (10.244.0.0/16).
	ClusterCIDR string
	// NodeCIDRMaskSize is --node-cidr-mask-size (single-stack; 24 for IPv4, 64 for IPv6);
	// NodeCIDRMaskSizeIPv4/IPv6 are --node-cidr-mask-size-ipv4/-ipv6 (dual-stack).
	NodeCIDRMaskSize, NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6 int
	// NoNodeCIDRAllocation is --allocate-node-cidrs=false: nodes get no podCIDR.
	NoNodeCIDRAllocation bool
	// NodeMonitorPeriod, NodeMonitorGracePeriod and NodeStartupGracePeriod are
	// --node-monitor-period (5 s), --node-monitor-grace-period (50 s) and
	// --node-startup-grace-period (60 s).
	NodeMonitorPeriod, NodeMonitorGracePeriod, NodeStartupGracePeriod time.Duration
	// NodeEvictionRate and SecondaryNodeEvictionRate are --node-eviction-rate (0.1) and
	// --secondary-node-eviction-rate (0.01), nodes per second tainted NoExecute per zone.
	NodeEvictionRate, SecondaryNodeEvictionRate float32
	// LargeClusterSizeThreshold is --large-cluster-size-threshold (50).
	LargeClusterSizeThreshold int32
	// UnhealthyZoneThreshold is --unhealthy-zone-threshold (0.55).
	UnhealthyZoneThreshold float32
	// TerminatedPodGCThreshold is --terminated-pod-gc-threshold (12500).
	TerminatedPodGCThreshold int
	// PodGCPeriod and PodGCQuarantine are the pod garbage collector's check period (20 s)
	// and the time a pod's node must be missing before the pod goes (40 s); no flags
	// (kube-controller-manager has none), tests shorten them.
	PodGCPeriod, PodGCQuarantine time.Duration
	// ConcurrentServiceEndpointSyncs is --concurrent-service-endpoint-syncs (5, the
	// EndpointSlice controller's workers); ConcurrentEndpointSyncs is
	// --concurrent-endpoint-syncs (5, the Endpoints controller's).
	ConcurrentServiceEndpointSyncs, ConcurrentEndpointSyncs int
	// MaxEndpointsPerSlice is --max-endpoints-per-slice (100).
	MaxEndpointsPerSlice int32
	// EndpointSliceUpdatesBatchPeriod is --endpointslice-updates-batch-period (0).
	EndpointSliceUpdatesBatchPeriod time.Duration
	// ResourceQuotaSyncPeriod is --resource-quota-sync-period (5 min).
	ResourceQuotaSyncPeriod time.Duration
	// HPASyncPeriod is --horizontal-pod-autoscaler-sync-period (15 s).
	HPASyncPeriod time.Duration
	// PVClaimBinderSyncPeriod is --pvclaimbinder-sync-period (15 s).
	PVClaimBinderSyncPeriod time.Duration
}

// ClusterControllerNames are the names --cluster-controllers accepts, in start order.
func ClusterControllerNames() []string {
	names := make([]string, len(clusterControllers))
	for i, c := range clusterControllers {
		names[i] = c.name
	}
	return names
}

func (o *ClusterControllerOptions) validate() error {
	names := ClusterControllerNames()
	for _, n := range o.ClusterControllers {
		if n == "*" {
			continue
		}
		if !slices.Contains(names, strings.TrimPrefix(n, "-")) {
			return fmt.Errorf("--cluster-controllers: %q is not one of *, %s (or -name)", n, strings.Join(names, ", "))
		}
	}
	if !o.NoNodeCIDRAllocation {
		if _, err := o.nodeIPAMConfig(); err != nil {
			return err
		}
	}
	for flag, d := range map[string]time.Duration{
		"--node-monitor-period": o.NodeMonitorPeriod, "--node-monitor-grace-period": o.NodeMonitorGracePeriod,
		"--node-startup-grace-period": o.NodeStartupGracePeriod, "--endpointslice-updates-batch-period": o.EndpointSliceUpdatesBatchPeriod,
		"--resource-quota-sync-period": o.ResourceQuotaSyncPeriod, "--horizontal-pod-autoscaler-sync-period": o.HPASyncPeriod,
		"--pvclaimbinder-sync-period": o.PVClaimBinderSyncPeriod,
	} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative", flag)
		}
	}
	if o.TerminatedPodGCThreshold < 0 {
		return errors.New("--terminated-pod-gc-threshold must not be negative")
	}
	if o.MaxEndpointsPerSlice < 0 || o.MaxEndpointsPerSlice > 1000 {
		return errors.New("--max-endpoints-per-slice must be between 1 and 1000")
	}
	if o.NodeEvictionRate < 0 || o.SecondaryNodeEvictionRate < 0 || o.UnhealthyZoneThreshold < 0 || o.UnhealthyZoneThreshold > 1 {
		return errors.New("--node-eviction-rate, --secondary-node-eviction-rate must not be negative and --unhealthy-zone-threshold must be in [0, 1]")
	}
	return nil
}

func (o *ClusterControllerOptions) nodeIPAMConfig() (nodeipam.Config, error) {
	cidr := o.ClusterCIDR
	if cidr == "" {
		cidr = nodeipam.DefaultClusterCIDR
	}
	return nodeipam.ParseConfig(cidr, o.NodeCIDRMaskSize, o.NodeCIDRMaskSizeIPv4, o.NodeCIDRMaskSizeIPv6)
}

// clusterControllerEnabled decides --cluster-controllers for name as
// kube-controller-manager decides --controllers: an explicit "name" or "-name" wins, else
// "*" (or an empty list) enables.
func clusterControllerEnabled(name string, list []string) bool {
	if len(list) == 0 {
		return true
	}
	star := false
	for _, n := range list {
		switch n {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star
}

// clusterController is an elected controller that --cluster-controllers can switch off.
func clusterController(name string, new func(s *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error)) electedController {
	return electedController{name: name, new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		o := &s.opts.ClusterControllerOptions
		if !clusterControllerEnabled(name, o.ClusterControllers) {
			log.Info("disabled by --cluster-controllers")
			return nil, nil // switched off: no Lease taken
		}
		// kube-controller-manager's --kube-api-content-type default: protobuf, which
		// informers of 100,000 pods decode several times faster than JSON.
		cfg = rest.CopyConfig(cfg)
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		return new(s, o, cfg, log)
	}}
}

// clusterControllers are elected controllers of the cluster controllers; startElectedControllers runs them
// after electedControllers. Each runs upstream's kube-controller-manager controller of the same name.
var clusterControllers = []electedController{
	clusterController(endpointslice.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return endpointslice.New(cfg, endpointslice.Options{Workers: o.ConcurrentServiceEndpointSyncs,
			MaxEndpointsPerSlice: o.MaxEndpointsPerSlice, BatchPeriod: o.EndpointSliceUpdatesBatchPeriod, Log: log})
	}),
	clusterController(endpointslicemirroring.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return endpointslicemirroring.New(cfg, endpointslicemirroring.Options{Log: log})
	}),
	clusterController(endpoints.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return endpoints.New(cfg, endpoints.Options{Workers: o.ConcurrentEndpointSyncs, Log: log})
	}),
	clusterController(nodeipam.Name, func(s *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		if o.NoNodeCIDRAllocation {
			log.Info("disabled by --allocate-node-cidrs=false")
			return nil, nil // switched off: no Lease taken
		}
		c, err := o.nodeIPAMConfig()
		if err != nil {
			return nil, err
		}
		r, err := servicealloc.ParseRanges(s.opts.ServiceClusterIPRange, s.opts.ServiceNodePortRange)
		if err != nil {
			return nil, err
		}
		return nodeipam.New(cfg, nodeipam.Options{Config: c, ServiceCIDRs: r.ServiceCIDRs, Log: log})
	}),
	clusterController(nodelifecycle.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return nodelifecycle.New(cfg, nodelifecycle.Options{MonitorPeriod: o.NodeMonitorPeriod, MonitorGracePeriod: o.NodeMonitorGracePeriod,
			StartupGracePeriod: o.NodeStartupGracePeriod, EvictionRate: o.NodeEvictionRate, SecondaryEvictionRate: o.SecondaryNodeEvictionRate,
			LargeClusterSizeThreshold: o.LargeClusterSizeThreshold, UnhealthyZoneThreshold: o.UnhealthyZoneThreshold, Log: log})
	}),
	clusterController(tainteviction.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return tainteviction.New(cfg, log)
	}),
	clusterController(podgc.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return podgc.New(cfg, podgc.Options{TerminatedPodThreshold: o.TerminatedPodGCThreshold, CheckPeriod: o.PodGCPeriod, Quarantine: o.PodGCQuarantine, Log: log})
	}),
	clusterController(resourcequota.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return resourcequota.New(cfg, resourcequota.Options{SyncPeriod: o.ResourceQuotaSyncPeriod, Log: log})
	}),
	clusterController(persistentvolume.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return persistentvolume.New(cfg, persistentvolume.Options{SyncPeriod: o.PVClaimBinderSyncPeriod, Log: log})
	}),
	clusterController(pvcprotection.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return pvcprotection.New(cfg, log)
	}),
	clusterController(pvprotection.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return pvprotection.New(cfg, log)
	}),
	clusterController(ephemeral.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return ephemeral.New(cfg, log)
	}),
	clusterController(podautoscaler.Name, func(_ *Server, o *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return podautoscaler.New(cfg, podautoscaler.Options{SyncPeriod: o.HPASyncPeriod, Log: log})
	}),
	// kube-controller-manager leaves the two bootstrap-token controllers off by default
	// (kubeadm turns them on); Kube runs them, `kube agent --token` joins through them.
	clusterController(bootstrapsigner.Name, func(s *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return bootstrapsigner.New(cfg, bootstrapsigner.Options{Server: s.URL, CAPEM: s.pki.CAPEM, Log: log})
	}),
	clusterController(tokencleaner.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return tokencleaner.New(cfg, log)
	}),
	clusterController(ttl.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return ttl.New(cfg, log)
	}),
	clusterController(storageversionmigration.Name, func(_ *Server, _ *ClusterControllerOptions, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return storageversionmigration.New(cfg, log)
	}),
}
