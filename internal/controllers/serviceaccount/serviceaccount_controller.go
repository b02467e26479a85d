package serviceaccount

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/serviceaccount"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "serviceaccount-controller"

// workers is the number of namespaces synced at once (kube-controller-manager's
// --concurrent-serviceaccount-syncs default).
const workers = 5

// Controller ensures the default ServiceAccount of every namespace.
type Controller struct {
	client kubernetes.Interface
	log    *slog.Logger
}

// New builds the controller on a client configuration.
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

// Start runs the controller until ctx ends. It can be called again after it returned (a new
// leadership term): informers and queue are made afresh.
func (c *Controller) Start(ctx context.Context) error {
	factory := sharedinformers.For(ctx, c.client)
	defer factory.Shutdown()
	logger := logr.FromSlogHandler(c.log.Handler())
	ctrl, err := upstream.NewServiceAccountsController(logger,
		factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), c.client,
		upstream.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	ctrl.Run(klog.NewContext(ctx, logger), workers)
	return nil
}
