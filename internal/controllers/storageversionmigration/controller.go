package storageversionmigration

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/storageversionmigrator"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (kube-controller-manager's).
const Name = "storage-version-migrator-controller"

// Controller migrates stored objects to the storage version.
type Controller struct {
	client    kubernetes.Interface
	crd       apiextensionsclient.Interface
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger
}

// New builds the controller on a client configuration; nothing runs until Start. A nil log
// discards.
func New(cfg *rest.Config, log *slog.Logger) (*Controller, error) {
	// A migration makes a request per object: as upstream, a higher client rate.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 400, 10000
	c := &Controller{log: log}
	var err error
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.crd, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		return nil, err
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Start runs the controller until ctx ends; it can be called again (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.log.Handler()))
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	svms := f.Storagemigration().V1().StorageVersionMigrations()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.discovery))
	runner := upstream.NewCustomResourceController(ctx, c.client, svms, c.crd.ApiextensionsV1().CustomResourceDefinitions())
	rv := upstream.NewResourceVersionController(ctx, c.client, c.discovery, c.metadata, svms, mapper)
	m := &migrator{
		client: c.client, dynamic: c.dynamic, metadata: c.metadata, mapper: mapper, lister: svms.Lister(), log: c.log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
	}
	if _, err := svms.Informer().AddEventHandler(m.handler()); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !waitSynced(ctx, svms.Informer().HasSynced) {
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { runner.Run(ctx) })
	wg.Go(func() { rv.Run(ctx) })
	wg.Go(func() { m.run(ctx) })
	wg.Wait()
	return nil
}

func waitSynced(ctx context.Context, synced func() bool) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
