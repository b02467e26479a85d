package podautoscaler

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/podautoscaler"
	"k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "horizontal-pod-autoscaler-controller"

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// Workers is --concurrent-horizontal-pod-autoscaler-syncs (5).
	Workers int
	// SyncPeriod is --horizontal-pod-autoscaler-sync-period (15 s).
	SyncPeriod time.Duration
	// DownscaleStabilization is --horizontal-pod-autoscaler-downscale-stabilization (5 min).
	DownscaleStabilization time.Duration
	// Tolerance is --horizontal-pod-autoscaler-tolerance (0.1).
	Tolerance float64
	// CPUInitializationPeriod is --horizontal-pod-autoscaler-cpu-initialization-period (5 min).
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay (30 s).
	InitialReadinessDelay time.Duration
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.Workers <= 0 {
		o.Workers = 5
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 15 * time.Second
	}
	if o.DownscaleStabilization <= 0 {
		o.DownscaleStabilization = 5 * time.Minute
	}
	if o.Tolerance <= 0 {
		o.Tolerance = 0.1
	}
	if o.CPUInitializationPeriod <= 0 {
		o.CPUInitializationPeriod = 5 * time.Minute
	}
	if o.InitialReadinessDelay <= 0 {
		o.InitialReadinessDelay = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Controller scales HPA targets.
type Controller struct {
	cfg    *rest.Config
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
	return &Controller{cfg: cfg, client: cs, o: o}, nil
}

// Start runs the controller until ctx ends; it can be called again (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	// A discovery-backed REST mapper, reset periodically as kube-controller-manager's is, so
	// that scale targets of kinds added later (CRDs with a scale subresource) resolve.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.client.Discovery()))
	scaleClient, err := scale.NewForConfig(c.cfg, mapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(c.client.Discovery()))
	if err != nil {
		return err
	}
	apiVersions := custom_metrics.NewAvailableAPIsGetter(c.client.Discovery())
	resources, err := resourceclient.NewForConfig(c.cfg)
	if err != nil {
		return err
	}
	external, err := external_metrics.NewForConfig(c.cfg)
	if err != nil {
		return err
	}
	metricsClient := metrics.NewRESTMetricsClient(resources, custom_metrics.NewForConfig(c.cfg, mapper, apiVersions), external)

	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	ctrl := upstream.NewHorizontalController(ctx, c.client.CoreV1(), scaleClient, c.client.AutoscalingV2(), mapper, metricsClient,
		f.Autoscaling().V2().HorizontalPodAutoscalers(), f.Core().V1().Pods(),
		c.o.SyncPeriod, c.o.DownscaleStabilization, c.o.Tolerance, c.o.CPUInitializationPeriod, c.o.InitialReadinessDelay)
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { mapper.Reset() }, 30*time.Second) })
	wg.Go(func() { custom_metrics.PeriodicallyInvalidate(apiVersions, c.o.SyncPeriod, ctx.Done()) })
	wg.Go(func() { ctrl.Run(ctx, c.o.Workers) })
	wg.Wait()
	return nil
}
