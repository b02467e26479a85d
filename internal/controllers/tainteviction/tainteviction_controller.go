package tainteviction

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	upstream "k8s.io/kubernetes/pkg/controller/tainteviction"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "taint-eviction-controller"

// Controller deletes pods from nodes with NoExecute taints they do not tolerate.
type Controller struct {
	client kubernetes.Interface
	log    *slog.Logger
}

// New builds the controller on a client configuration; nothing runs until Start. A nil log
// discards.
func New(cfg *rest.Config, log *slog.Logger) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{client: cs, log: log}, nil
}

// Start runs the controller until ctx ends; it can be called again (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.log.Handler()))
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	// Upstream's controller finds a node's pods through the spec.nodeName index, which in
	// kube-controller-manager the node lifecycle controller adds to the shared informer.
	if err := controller.AddPodNodeNameIndexer(f.Core().V1().Pods().Informer()); err != nil {
		return err
	}
	ctrl, err := upstream.New(ctx, c.client, f.Core().V1().Pods(), f.Core().V1().Nodes(), Name)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	ctrl.Run(ctx)
	return nil
}
