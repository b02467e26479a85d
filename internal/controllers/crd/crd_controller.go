package crd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiextlisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	compiler "kubeos.dev/kube/internal/crd"
	"kubeos.dev/kube/internal/registry"
)

// Caches is the part of the watch cache set the controller uses: stopping the cache of a
// deleted resource.
type Caches interface {
	Stop(prefix string)
}

// Options configure the controller.
type Options struct {
	// Config is the loopback client configuration.
	Config *rest.Config
	// Registry is the server's registry the Kinds go into.
	Registry *registry.Registry
	// Caches, when set, has the watch cache of a deleted resource stopped.
	Caches Caches
	// Compile options for the Kinds (conversion webhook service resolution).
	Compile compiler.Options
	Log     *slog.Logger
}

// Controller registers CRDs, maintains their status, deletes the content of deleted ones
// and migrates their objects to the storage version.
type Controller struct {
	o        Options
	client   apiextclient.Interface
	dynamic  dynamic.Interface
	factory  apiextinformers.SharedInformerFactory
	lister   apiextlisters.CustomResourceDefinitionLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	builtins map[schema.GroupResource]*registry.Kind

	// served is what this server registered per CRD name; only the worker touches it.
	served map[string]*servedCRD
}

// servedCRD records the Kinds registered for one CRD.
type servedCRD struct {
	uid         string
	generation  int64
	terminating bool
	names       apiextensionsv1.CustomResourceDefinitionNames
	gvrs        []schema.GroupVersionResource
}

// New builds the controller. It must be built before any CRD Kind is registered: the kinds
// in the registry then are the built-in ones, whose names CRDs may not take.
func New(o Options) (*Controller, error) {
	cfg := rest.CopyConfig(o.Config)
	cfg.ContentType = "application/json"
	cs, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		o: o, client: cs, dynamic: dyn,
		factory: apiextinformers.NewSharedInformerFactory(cs, 0),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd"}),
		builtins: map[schema.GroupResource]*registry.Kind{},
		served:   map[string]*servedCRD{},
	}
	for _, k := range o.Registry.Kinds() {
		c.builtins[schema.GroupResource{Group: k.Group, Resource: k.Resource}] = k
	}
	inf := c.factory.Apiextensions().V1().CustomResourceDefinitions()
	c.lister = inf.Lister()
	c.synced = inf.Informer().HasSynced
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			c.queue.Add(crd.Name)
			// Names freed or taken by one CRD can change the acceptance of others in the
			// group.
			c.enqueueGroup(crd.Spec.Group, crd.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// enqueueGroup queues the CRDs of group that have not accepted their names yet.
func (c *Controller) enqueueGroup(group, except string) {
	crds, err := c.lister.List(everything)
	if err != nil {
		return
	}
	for _, crd := range crds {
		if crd.Spec.Group == group && crd.Name != except && !isTrue(crd, apiextensionsv1.NamesAccepted) {
			c.queue.Add(crd.Name)
		}
	}
}

// Start runs the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("CRD informer did not sync")
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.processNext(ctx) {
	}
	return nil
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	requeue, err := c.reconcile(ctx, name)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.o.Log.Warn("crd reconcile", "crd", name, "err", err)
		}
		c.queue.AddRateLimited(name)
	case requeue > 0:
		c.queue.Forget(name)
		c.queue.AddAfter(name, requeue)
	default:
		c.queue.Forget(name)
	}
	return true
}
