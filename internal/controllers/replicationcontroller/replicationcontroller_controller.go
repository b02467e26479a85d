package replicationcontroller

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/replication"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "replicationcontroller-controller"

// DefaultWorkers is kube-controller-manager's --concurrent-rc-syncs default.
const DefaultWorkers = 5

// Options configure the controller.
type Options struct {
	// Workers is the number of ReplicationControllers synced at once; DefaultWorkers when zero.
	Workers int
	// Log receives the controller's logs (upstream's klog output included); nil discards.
	Log *slog.Logger
}

// Controller is the ReplicationController manager. See the package documentation.
type Controller struct {
	client kubernetes.Interface
	o      Options
}

// New prepares the controller on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), Name)
	// Protobuf, as kube-controller-manager's --kube-api-content-type default: pod creates
	// and status writes cost both this client and the server less than in JSON.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &Controller{client: cs, o: o}, nil
}

// Start runs the controller until ctx ends. It can be called again after it returned (a
// new leadership term): informers, queue and expectations are made afresh.
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	// Related controllers' pods are listed by selector: through an index
	// (sharedinformers.LabelIndexedPods).
	pods, err := sharedinformers.LabelIndexedPods(f.Core().V1().Pods())
	if err != nil {
		return err
	}
	ctrl := upstream.NewReplicationManager(ctx, pods, f.Core().V1().ReplicationControllers(), c.client, upstream.BurstReplicas)
	f.Start(ctx.Done())
	ctrl.Run(ctx, c.o.Workers)
	return nil
}
