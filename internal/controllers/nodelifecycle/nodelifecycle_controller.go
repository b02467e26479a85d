package nodelifecycle

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/nodelifecycle"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "node-lifecycle-controller"

// kube-controller-manager's defaults (pkg/controller/nodelifecycle/config/v1alpha1/defaults.go
// and cmd/kube-controller-manager/app/options/nodelifecyclecontroller.go).
const (
	DefaultMonitorPeriod             = 5 * time.Second
	DefaultMonitorGracePeriod        = 50 * time.Second
	DefaultStartupGracePeriod        = 60 * time.Second
	DefaultEvictionRate              = 0.1
	DefaultSecondaryEvictionRate     = 0.01
	DefaultLargeClusterSizeThreshold = 50
	DefaultUnhealthyZoneThreshold    = 0.55
)

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// MonitorPeriod is --node-monitor-period: how often node health is checked.
	MonitorPeriod time.Duration
	// MonitorGracePeriod is --node-monitor-grace-period: how long a node may go without a
	// heartbeat before it is marked Unknown.
	MonitorGracePeriod time.Duration
	// StartupGracePeriod is --node-startup-grace-period: the same for a node that never
	// posted a Ready condition.
	StartupGracePeriod time.Duration
	// EvictionRate is --node-eviction-rate: nodes per second tainted NoExecute per zone
	// when the zone is healthy.
	EvictionRate float32
	// SecondaryEvictionRate is --secondary-node-eviction-rate: the same when the zone is
	// partially disrupted (and large, see LargeClusterSizeThreshold).
	SecondaryEvictionRate float32
	// LargeClusterSizeThreshold is --large-cluster-size-threshold.
	LargeClusterSizeThreshold int32
	// UnhealthyZoneThreshold is --unhealthy-zone-threshold: the fraction of not-ready nodes
	// (at least 3) that makes a zone partially disrupted.
	UnhealthyZoneThreshold float32
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.MonitorPeriod <= 0 {
		o.MonitorPeriod = DefaultMonitorPeriod
	}
	if o.MonitorGracePeriod <= 0 {
		o.MonitorGracePeriod = DefaultMonitorGracePeriod
	}
	if o.StartupGracePeriod <= 0 {
		o.StartupGracePeriod = DefaultStartupGracePeriod
	}
	if o.EvictionRate <= 0 {
		o.EvictionRate = DefaultEvictionRate
	}
	if o.SecondaryEvictionRate <= 0 {
		o.SecondaryEvictionRate = DefaultSecondaryEvictionRate
	}
	if o.LargeClusterSizeThreshold <= 0 {
		o.LargeClusterSizeThreshold = DefaultLargeClusterSizeThreshold
	}
	if o.UnhealthyZoneThreshold <= 0 {
		o.UnhealthyZoneThreshold = DefaultUnhealthyZoneThreshold
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Controller watches node heartbeats and taints silent nodes.
type Controller struct {
	client kubernetes.Interface
	o      Options
}

// New builds the controller on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	o.complete()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{client: cs, o: o}, nil
}

// Start runs the controller until ctx ends; it can be called again (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	ctrl, err := upstream.NewNodeLifecycleController(ctx, f.Coordination().V1().Leases(), f.Core().V1().Pods(),
		f.Core().V1().Nodes(), f.Apps().V1().DaemonSets(), c.client,
		c.o.MonitorPeriod, c.o.StartupGracePeriod, c.o.MonitorGracePeriod,
		c.o.EvictionRate, c.o.SecondaryEvictionRate, c.o.LargeClusterSizeThreshold, c.o.UnhealthyZoneThreshold)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	ctrl.Run(ctx)
	return nil
}
