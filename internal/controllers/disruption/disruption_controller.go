package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/disruption"

	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "disruption-controller"

// DefaultWorkers is kube-controller-manager's --concurrent-disruption-syncs default.
const DefaultWorkers = 1

// mapperReset is how often the discovery-backed REST mapper forgets what it learnt, so
// scale subresources of kinds added later (CRDs) are found (kube-controller-manager resets
// its mapper every 30 s).
const mapperReset = 30 * time.Second

// Options configure the controller.
type Options struct {
	// Workers is the number of PodDisruptionBudgets synced at once; DefaultWorkers when
	// zero.
	Workers int
	// Log receives the controller's logs (upstream's klog output included); nil discards.
	Log *slog.Logger
}

// Controller is the disruption controller. See the package documentation.
type Controller struct {
	cfg    *rest.Config
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
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &Controller{cfg: cfg, client: cs, o: o}, nil
}

// Start runs the controller until ctx ends. It can be called again after it returned (a
// new leadership term): informers and queues are made afresh.
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.client.Discovery()))
	go wait.Until(mapper.Reset, mapperReset, ctx.Done())
	scales, err := scale.NewForConfig(c.cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(c.client.Discovery()))
	if err != nil {
		return fmt.Errorf("%s: scale client: %w", Name, err)
	}
	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	// A budget's sync lists its pods by its selector: through an index (sharedinformers.LabelIndexedPods).
	pods, err := sharedinformers.LabelIndexedPods(f.Core().V1().Pods())
	if err != nil {
		return err
	}
	ctrl := upstream.NewDisruptionController(ctx, pods, f.Policy().V1().PodDisruptionBudgets(),
		f.Core().V1().ReplicationControllers(), f.Apps().V1().ReplicaSets(), f.Apps().V1().Deployments(), f.Apps().V1().StatefulSets(),
		c.client, mapper, scales, c.client.Discovery())
	f.Start(ctx.Done())
	ctrl.Run(ctx, c.o.Workers)
	return nil
}
