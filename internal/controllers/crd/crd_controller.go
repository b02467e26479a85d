package crd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// Workers is how many CRDs are reconciled in parallel. Default 8.
	Workers int
	// Leading, when set, says whether this server holds the CRD controller's Lease. Every
	// server registers the Kinds of the CRDs it sees; only the leader writes CRD status,
	// deletes the resources of deleted CRDs and migrates storage versions. nil: always.
	Leading func() bool
	Log     *slog.Logger
}

// Controller registers CRDs, maintains their status, deletes the content of deleted ones
// and migrates their objects to the storage version.
type Controller struct {
	o       Options
	client  apiextclient.Interface
	dynamic dynamic.Interface
	factory apiextinformers.SharedInformerFactory
	// indexer holds the CRDs stripped (compiler.Stripped): never write one back.
	indexer cache.Indexer
	synced  cache.InformerSynced
	// registered is closed once every CRD present at start is registered (served).
	registered chan struct{}
	queue      workqueue.TypedRateLimitingInterface[string]
	builtins   map[schema.GroupResource]*registry.Kind

	// mu guards served and accepted and makes "decide the names, then register" one step,
	// so that two workers never accept the same name for two CRDs of a group. It is never
	// held across an API call.
	mu sync.Mutex
	// served is what this server registered per CRD name.
	served map[string]*servedCRD
	// accepted is the names this server last decided per CRD name, for the resourceVersion
	// the decision was made on: until the informer shows the status written with them, they
	// are the CRD's names that others of its group cannot take.
	accepted map[string]acceptedNames
	// structural is the NonStructuralSchema check per CRD name, for the generation it was
	// made for: decoding the schemas again on every reconcile would cost more than the
	// rest of it.
	structural map[string]structuralCheck
	// finalized holds, by name, the UID of each deleted CRD whose finalizer this server
	// removed: the informer may still show it with the finalizer for a moment, and it must
	// not be served again. The entry goes with the CRD.
	finalized map[string]types.UID
}

// servedCRD records the Kinds registered for one CRD.
type servedCRD struct {
	uid         string
	generation  int64
	terminating bool
	names       apiextensionsv1.CustomResourceDefinitionNames
	gvrs        []schema.GroupVersionResource
}

// acceptedNames are the names decided for one resourceVersion of a CRD.
type acceptedNames struct {
	resourceVersion string
	names           apiextensionsv1.CustomResourceDefinitionNames
}

// New builds the controller. It must be built before any CRD Kind is registered: the kinds
// in the registry then are the built-in ones, whose names CRDs may not take.
func New(o Options) (*Controller, error) {
	cfg := rest.CopyConfig(o.Config)
	// CRDs travel in protobuf, as kube-apiserver's loopback clients send them: the informer
	// decodes every CRD event (schemas included) several times cheaper than from JSON. The
	// dynamic client below sets JSON for custom resources itself.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
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
	if o.Workers <= 0 {
		o.Workers = 8
	}
	c := &Controller{
		o: o, client: cs, dynamic: dyn,
		factory: apiextinformers.NewSharedInformerFactory(cs, 0),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd"}),
		builtins:   map[schema.GroupResource]*registry.Kind{},
		served:     map[string]*servedCRD{},
		accepted:   map[string]acceptedNames{},
		structural: map[string]structuralCheck{},
		finalized:  map[string]types.UID{},
	}
	for _, k := range o.Registry.Kinds() {
		c.builtins[schema.GroupResource{Group: k.Group, Resource: k.Resource}] = k
	}
	inf := c.factory.Apiextensions().V1().CustomResourceDefinitions()
	// The informer keeps each CRD stripped: the schemas stay JSON until a custom resource of
	// the version is served (the Kinds decode them then), so an idle CRD is cheap.
	if err := inf.Informer().SetTransform(compiler.StripTransform); err != nil {
		return nil, err
	}
	// By group: name checks and re-queues look at one group's CRDs, not at all of them
	// (O(n) per event would make n CRDs cost O(n²)).
	if err := inf.Informer().AddIndexers(cache.Indexers{byGroup: func(obj any) ([]string, error) {
		if crd, ok := obj.(*compiler.Stripped); ok {
			return []string{crd.Spec.Group}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	c.indexer = inf.Informer().GetIndexer()
	c.synced = inf.Informer().HasSynced
	c.registered = make(chan struct{})
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if crd, ok := obj.(*compiler.Stripped); ok {
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

// byGroup is the informer index of CRDs by spec.group.
const byGroup = "group"

// groupCRDs returns the CRDs of one group.
func (c *Controller) groupCRDs(group string) []*compiler.Stripped {
	objs, err := c.indexer.ByIndex(byGroup, group)
	if err != nil {
		return nil
	}
	return stripped(objs)
}

// list returns every CRD the informer holds.
func (c *Controller) list() []*compiler.Stripped { return stripped(c.indexer.List()) }

// get returns the CRD named name; false if the informer has none.
func (c *Controller) get(name string) (*compiler.Stripped, bool) {
	o, ok, err := c.indexer.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	crd, ok := o.(*compiler.Stripped)
	return crd, ok
}

func stripped(objs []any) []*compiler.Stripped {
	out := make([]*compiler.Stripped, 0, len(objs))
	for _, o := range objs {
		if crd, ok := o.(*compiler.Stripped); ok {
			out = append(out, crd)
		}
	}
	return out
}

// enqueueGroup queues the CRDs of group that have not accepted their names yet.
func (c *Controller) enqueueGroup(group, except string) {
	for _, crd := range c.groupCRDs(group) {
		if crd.Name != except && !isTrue(crd.CustomResourceDefinition, apiextensionsv1.NamesAccepted) {
			c.queue.Add(crd.Name)
		}
	}
}

// Registered is closed once the CRDs that existed when the controller started are served.
func (c *Controller) Registered() <-chan struct{} { return c.registered }

// Resync queues every CRD again: a server that has just become leader catches up with the
// status work its predecessor may have left.
func (c *Controller) Resync() {
	for _, crd := range c.list() {
		c.queue.Add(crd.Name)
	}
}

func (c *Controller) leading() bool { return c.o.Leading == nil || c.o.Leading() }

// Start runs the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("CRD informer did not sync")
	}
	// Serve every existing CRD before the server reports ready (kube-apiserver's
	// crd-informer-synced readiness): a client that cached discovery must not get 404s
	// after a restart.
	for _, crd := range c.list() {
		if crd.DeletionTimestamp == nil {
			c.mu.Lock()
			if d := c.decide(crd); d.served() {
				c.register(crd, d.accepted, false)
			}
			c.mu.Unlock()
		}
	}
	close(c.registered)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var workers sync.WaitGroup
	for range c.o.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	workers.Wait()
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
