package endpointslice

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/endpointslice"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "endpointslice-controller"

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// Workers is --concurrent-service-endpoint-syncs (5).
	Workers int
	// MaxEndpointsPerSlice is --max-endpoints-per-slice (100).
	MaxEndpointsPerSlice int32
	// BatchPeriod is --endpointslice-updates-batch-period (0: every pod change syncs its
	// Services at once).
	BatchPeriod time.Duration
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.Workers <= 0 {
		o.Workers = 5
	}
	if o.MaxEndpointsPerSlice <= 0 {
		o.MaxEndpointsPerSlice = 100
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Controller keeps the EndpointSlices of selector Services.
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

// Start runs the controller until ctx ends. It can be called again after it returned (a new
// leadership term): informers and queues are made afresh.
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	// A Service's sync lists its pods and its slices by label: through an index, not a scan
	// of the namespace (sharedinformers.LabelIndexedPods).
	pods, err := sharedinformers.LabelIndexedPods(f.Core().V1().Pods())
	if err != nil {
		return err
	}
	slices, err := sharedinformers.LabelIndexedEndpointSlices(f.Discovery().V1().EndpointSlices())
	if err != nil {
		return err
	}
	// A pod's change finds its Services through an index of their selectors, not by matching
	// every Service of the namespace (sharedinformers.SelectorMappedPods).
	pods, services, err := sharedinformers.SelectorMappedPods(pods, f.Core().V1().Services(), c.o.BatchPeriod)
	if err != nil {
		return err
	}
	ctrl := upstream.NewController(ctx, pods, services, f.Core().V1().Nodes(),
		slices, c.o.MaxEndpointsPerSlice, c.client, c.o.BatchPeriod)
	f.Start(ctx.Done())
	ctrl.Run(ctx, c.o.Workers)
	return nil
}
