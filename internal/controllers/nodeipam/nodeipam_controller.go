package nodeipam

import (
	"context"
	"log/slog"
	"net"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/nodeipam"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "node-ipam-controller"

// Options configure the controller.
type Options struct {
	Config
	// ServiceCIDRs are the Service cluster IP ranges (at most two), kept out of node
	// blocks where they overlap the cluster CIDR.
	ServiceCIDRs []*net.IPNet
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

// Controller allocates node pod CIDRs.
type Controller struct {
	client kubernetes.Interface
	o      Options
}

// New builds the controller on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if len(o.ClusterCIDRs) == 0 {
		c, err := ParseConfig(DefaultClusterCIDR, 0, 0, 0)
		if err != nil {
			return nil, err
		}
		o.Config = c
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

// Start runs the controller until ctx ends; it can be called again (a new leadership term:
// the allocator rebuilds its bitmap from the nodes' podCIDRs).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	var svc, svc2 *net.IPNet
	if len(c.o.ServiceCIDRs) > 0 {
		svc = c.o.ServiceCIDRs[0]
	}
	if len(c.o.ServiceCIDRs) > 1 {
		svc2 = c.o.ServiceCIDRs[1]
	}
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	ctrl, err := upstream.NewNodeIpamController(ctx, f.Core().V1().Nodes(), nil, c.client,
		c.o.ClusterCIDRs, svc, svc2, c.o.MaskSizes, ipam.RangeAllocatorType)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	ctrl.Run(ctx)
	return nil
}
