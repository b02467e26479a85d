package persistentvolume

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/volume/persistentvolume"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "persistentvolume-binder-controller"

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// SyncPeriod is --pvclaimbinder-sync-period (15 s).
	SyncPeriod time.Duration
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

// Controller binds claims to volumes.
type Controller struct {
	client kubernetes.Interface
	o      Options
}

// New builds the controller on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
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
	ctrl, err := upstream.NewController(ctx, upstream.ControllerParameters{
		KubeClient:     c.client,
		SyncPeriod:     c.o.SyncPeriod,
		VolumePlugins:  nil, // no in-tree plugins: provisioning and deletion are external
		VolumeInformer: f.Core().V1().PersistentVolumes(),
		ClaimInformer:  f.Core().V1().PersistentVolumeClaims(),
		ClassInformer:  f.Storage().V1().StorageClasses(),
		PodInformer:    f.Core().V1().Pods(),
		NodeInformer:   f.Core().V1().Nodes(),
		// kube-controller-manager's --enable-dynamic-provisioning default: claims of a
		// class get the storage-provisioner annotation external provisioners wait for.
		EnableDynamicProvisioning: true,
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	ctrl.Run(ctx)
	return nil
}
