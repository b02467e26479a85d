package ttl

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/ttl"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "ttl-controller"

// Controller annotates nodes with their object-cache TTL.
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
	ctrl := upstream.NewTTLController(ctx, f.Core().V1().Nodes(), c.client)
	f.Start(ctx.Done())
	ctrl.Run(ctx, 5) // kube-controller-manager's 5 workers
	return nil
}
