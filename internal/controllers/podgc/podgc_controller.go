package podgc

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/podgc"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "pod-garbage-collector"

// DefaultTerminatedPodThreshold is --terminated-pod-gc-threshold's default.
const DefaultTerminatedPodThreshold = 12500

// Options configure the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// TerminatedPodThreshold is --terminated-pod-gc-threshold: terminated pods beyond this
	// number are deleted, oldest first.
	TerminatedPodThreshold int
	// CheckPeriod is how often the collector runs (upstream's 20 s).
	CheckPeriod time.Duration
	// Quarantine is how long a pod's node must be missing before the pod is deleted
	// (upstream's 40 s).
	Quarantine time.Duration
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.TerminatedPodThreshold <= 0 {
		o.TerminatedPodThreshold = DefaultTerminatedPodThreshold
	}
	if o.CheckPeriod <= 0 {
		o.CheckPeriod = 20 * time.Second
	}
	if o.Quarantine <= 0 {
		o.Quarantine = 40 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Controller deletes orphaned and surplus terminated pods.
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
	// NewPodGCInternal is NewPodGC with the check period and quarantine as parameters.
	ctrl := upstream.NewPodGCInternal(ctx, c.client, f.Core().V1().Pods(), f.Core().V1().Nodes(),
		c.o.TerminatedPodThreshold, c.o.CheckPeriod, c.o.Quarantine)
	f.Start(ctx.Done())
	ctrl.Run(ctx)
	return nil
}
