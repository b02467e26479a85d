package namespace

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/namespace"

	"kubeos.dev/kube/internal/controllers/recorder"
	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "namespace-controller"

// kube-controller-manager's defaults: --concurrent-namespace-syncs and
// --namespace-sync-period.
const (
	workers    = 10
	syncPeriod = 5 * time.Minute
)

// Controller deletes the content of deleted namespaces.
type Controller struct {
	cfg      *rest.Config
	client   kubernetes.Interface
	metadata metadata.Interface
	log      *slog.Logger
}

// New builds the controller on a client configuration.
func New(cfg *rest.Config, log *slog.Logger) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg, client: cs, metadata: md, log: log}, nil
}

// Start runs the controller until ctx ends. It can be called again after it returned (a
// new leadership term): informers, queue and event recorder are made afresh.
func (c *Controller) Start(ctx context.Context) error {
	rec, err := recorder.Start(ctx, c.cfg, Name)
	if err != nil {
		return err
	}
	defer rec.Stop()
	factory := sharedinformers.For(ctx, c.client)
	defer factory.Shutdown()
	inf := factory.Core().V1().Namespaces()
	if _, err := inf.Informer().AddEventHandler(eventHandler(rec)); err != nil {
		return err
	}
	logger := logr.FromSlogHandler(c.log.Handler())
	ctx = klog.NewContext(ctx, logger)
	ctrl := upstream.NewNamespaceController(ctx, c.client, c.metadata, c.client.Discovery().ServerPreferredNamespacedResources,
		inf, syncPeriod, corev1.FinalizerKubernetes)
	factory.Start(ctx.Done())
	ctrl.Run(ctx, workers)
	return nil
}

// eventHandler records DeletingContent when a namespace starts terminating and
// ContentDeleted when it is gone.
func eventHandler(rec *recorder.Recorder) cache.ResourceEventHandler {
	terminating := func(obj any) *corev1.Namespace {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			return ns
		}
		return nil
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if terminating(old) == nil {
				if ns := terminating(cur); ns != nil {
					rec.Eventf(ns, nil, corev1.EventTypeNormal, "DeletingContent", "DeleteContent", "deleting all content of namespace %s", ns.Name)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ns, ok := obj.(*corev1.Namespace); ok {
				rec.Eventf(ns, nil, corev1.EventTypeNormal, "ContentDeleted", "Finalize", "all content deleted; namespace %s finalized", ns.Name)
			}
		},
	}
}
