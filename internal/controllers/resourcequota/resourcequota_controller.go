package resourcequota

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	upstream "k8s.io/kubernetes/pkg/controller/resourcequota"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "resourcequota-controller"

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// Workers is --concurrent-resource-quota-syncs (5).
	Workers int
	// SyncPeriod is --resource-quota-sync-period (5 min): full recalculation of every quota.
	SyncPeriod time.Duration
	// DiscoveryPeriod is how often the quotable resources are rediscovered (30 s).
	DiscoveryPeriod time.Duration
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.Workers <= 0 {
		o.Workers = 5
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 5 * time.Minute
	}
	if o.DiscoveryPeriod <= 0 {
		o.DiscoveryPeriod = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// replenishmentResync is kube-controller-manager's --min-resync-period (12 h).
const replenishmentResync = 12 * time.Hour

// Controller writes ResourceQuota status.
type Controller struct {
	client   kubernetes.Interface
	meta     metadata.Interface
	discover discovery.DiscoveryInterface
	o        Options
}

// New builds the controller on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	o.complete()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{client: cs, meta: mc, discover: cs.Discovery(), o: o}, nil
}

// Start runs the controller until ctx ends; it can be called again (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	typed := sharedinformers.For(ctx, c.client)
	defer typed.Shutdown()
	meta := metadatainformer.NewSharedInformerFactory(c.meta, 0)
	objOrMeta := informerfactory.NewInformerFactory(typed, meta)
	started := make(chan struct{})
	cfg, err := quotainstall.NewQuotaConfigurationForControllers(generic.ListerFuncForResourceFunc(typed.ForResource), typed)
	if err != nil {
		return err
	}
	discoveryFunc := c.discover.ServerPreferredNamespacedResources
	ctrl, err := upstream.NewController(ctx, &upstream.ControllerOptions{
		QuotaClient:               c.client.CoreV1(),
		ResourceQuotaInformer:     typed.Core().V1().ResourceQuotas(),
		ResyncPeriod:              controller.StaticResyncPeriodFunc(c.o.SyncPeriod),
		InformerFactory:           objOrMeta,
		ReplenishmentResyncPeriod: controller.StaticResyncPeriodFunc(replenishmentResync),
		DiscoveryFunc:             discoveryFunc,
		IgnoredResourcesFunc:      cfg.IgnoredResources,
		InformersStarted:          started,
		Registry:                  generic.NewRegistry(cfg.Evaluators()),
		UpdateFilter:              quotainstall.DefaultUpdateFilter(),
	})
	if err != nil {
		return err
	}
	typed.Start(ctx.Done())
	meta.Start(ctx.Done())
	close(started)
	defer meta.Shutdown()
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, c.o.Workers) })
	wg.Go(func() { ctrl.Sync(ctx, discoveryFunc, c.o.DiscoveryPeriod) })
	wg.Wait()
	return nil
}
