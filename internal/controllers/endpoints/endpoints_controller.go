package endpoints

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/endpoint"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "endpoints-controller"

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// Workers is --concurrent-endpoint-syncs (5).
	Workers int
	// BatchPeriod is --endpoint-updates-batch-period (0).
	BatchPeriod time.Duration
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.Workers <= 0 {
		o.Workers = 5
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Controller keeps the Endpoints of selector Services.
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
	// A Service's sync lists its pods by label: through an index (sharedinformers.LabelIndexedPods).
	pods, err := sharedinformers.LabelIndexedPods(f.Core().V1().Pods())
	if err != nil {
		return err
	}
	// A pod's change finds its Services through an index of their selectors, not by matching
	// every Service of the namespace (sharedinformers.SelectorMappedPods).
	pods, services, err := sharedinformers.SelectorMappedPods(pods, f.Core().V1().Services(), c.o.BatchPeriod)
	if err != nil {
		return err
	}
	ctrl := upstream.NewEndpointController(ctx, pods, services,
		f.Core().V1().Endpoints(), c.client, c.o.BatchPeriod)
	f.Start(ctx.Done())
	ctrl.Run(ctx, c.o.Workers)
	return nil
}
