package rootcacert

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "root-ca-cert-publisher"

// workers is kube-controller-manager's --concurrent-rootca-cert-publisher-syncs default.
const workers = 5

// Controller publishes the CA in every namespace.
type Controller struct {
	client kubernetes.Interface
	caPEM  []byte
	log    *slog.Logger
}

// New builds the controller on a client configuration; caPEM is the CA bundle to publish.
func New(cfg *rest.Config, caPEM []byte, log *slog.Logger) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{client: cs, caPEM: caPEM, log: log}, nil
}

// Start runs the controller until ctx ends; it can be called again for a new leadership
// term.
func (c *Controller) Start(ctx context.Context) error {
	factory := sharedinformers.For(ctx, c.client)
	defer factory.Shutdown()
	p, err := upstream.NewPublisher(factory.Core().V1().ConfigMaps(), factory.Core().V1().Namespaces(), c.client, c.caPEM)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	p.Run(klog.NewContext(ctx, logr.FromSlogHandler(c.log.Handler())), workers)
	return nil
}
