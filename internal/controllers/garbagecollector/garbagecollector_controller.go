package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/lru"

	"kubeos.dev/kube/internal/controllers/recorder"
)

// Name is the controller's name: its Lease, its identity suffix and its event reporter.
const Name = "garbage-collector"

// Options configure the garbage collector; zero values take the defaults.
type Options struct {
	// Workers is how many objects are processed (deleted, orphaned) in parallel. Default 32.
	Workers int
	// DiscoveryPeriod is how often the served resources are discovered again. Default 10 s.
	DiscoveryPeriod time.Duration
	// InitialSyncTimeout bounds the wait for the first informers before workers start
	// anyway (a resource that cannot be listed must not stop collection). Default 30 s.
	InitialSyncTimeout time.Duration
	// Log is the controller's logger; nil discards.
	Log *slog.Logger
}

func (o *Options) complete() {
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.DiscoveryPeriod <= 0 {
		o.DiscoveryPeriod = 10 * time.Second
	}
	if o.InitialSyncTimeout <= 0 {
		o.InitialSyncTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// ignoredResources are never watched: events churn, and nothing owns them in practice
// (kube-controller-manager ignores the same).
var ignoredResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// triggerResources are resources whose changes mean discovery changes soon.
var triggerResources = map[schema.GroupResource]bool{
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}: true,
	{Group: "apiregistration.k8s.io", Resource: "apiservices"}:             true,
}

// mapping is how a group and kind are served.
type mapping struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// watched is one resource's informer.
type watched struct {
	apiVersion, kind string
	informer         cache.SharedIndexInformer
	cancel           context.CancelFunc
}

// GarbageCollector deletes dependents whose owners are gone. Build with New, run with Start.
type GarbageCollector struct {
	cfg       *rest.Config
	o         Options
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger

	graph *graph
	// absent holds owners confirmed gone by a live GET ("uid/namespace"); UIDs are never
	// reused, so an entry never goes stale.
	absent *lru.Cache
	queue  workqueue.TypedRateLimitingInterface[types.UID]
	events events.EventRecorder

	mu       sync.Mutex
	kinds    map[schema.GroupKind]mapping
	watching map[schema.GroupVersionResource]*watched
	// rediscover asks the discovery loop to run now.
	rediscover chan struct{}
}

// New builds a garbage collector that acts through cfg.
func New(cfg *rest.Config, o Options) (*GarbageCollector, error) {
	o.complete()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &GarbageCollector{cfg: cfg, o: o, dynamic: dyn, metadata: md, discovery: disc, log: o.Log}, nil
}

// Start runs the garbage collector until ctx ends: it discovers the resources, fills the
// graph, then processes changes with Options.Workers workers. It can be called again after
// it returned (a new leadership term) and starts from scratch.
func (gc *GarbageCollector) Start(ctx context.Context) error {
	gc.graph = newGraph()
	gc.absent = lru.New(100000)
	gc.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](50*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: Name})
	gc.kinds = map[schema.GroupKind]mapping{}
	gc.watching = map[schema.GroupVersionResource]*watched{}
	gc.rediscover = make(chan struct{}, 1)
	rec, err := recorder.Start(ctx, gc.cfg, Name)
	if err != nil {
		return err
	}
	defer rec.Stop()
	gc.events = rec

	var informers sync.WaitGroup
	defer func() {
		gc.mu.Lock()
		for _, w := range gc.watching {
			w.cancel()
		}
		gc.mu.Unlock()
		informers.Wait()
	}()
	for {
		err := gc.resync(ctx, &informers)
		if err == nil {
			break
		}
		gc.log.Warn("discovery", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	syncCtx, cancel := context.WithTimeout(ctx, gc.o.InitialSyncTimeout)
	gc.mu.Lock()
	synced := make([]cache.InformerSynced, 0, len(gc.watching))
	for _, w := range gc.watching {
		synced = append(synced, w.informer.HasSynced)
	}
	gc.mu.Unlock()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) && ctx.Err() == nil {
		gc.log.Warn("not every resource synced; collecting anyway")
	}
	cancel()
	if ctx.Err() != nil {
		return nil
	}

	var workers sync.WaitGroup
	for range gc.o.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for gc.processNext(ctx) {
			}
		}()
	}
	defer workers.Wait()
	defer gc.queue.ShutDown()
	gc.log.Info("garbage collector running", "resources", len(synced))

	ticker := time.NewTicker(gc.o.DiscoveryPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-gc.rediscover:
			// Let a burst of changes (a CRD and its establishment) settle.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err := gc.resync(ctx, &informers); err != nil && ctx.Err() == nil {
			gc.log.Warn("discovery", "err", err)
		}
	}
}

// requestRediscovery makes the discovery loop run soon.
func (gc *GarbageCollector) requestRediscovery() {
	select {
	case gc.rediscover <- struct{}{}:
	default:
	}
}

// resync discovers the served resources, starts informers for new ones and stops those of
// resources that went away (forgetting their objects).
func (gc *GarbageCollector) resync(ctx context.Context, informers *sync.WaitGroup) error {
	lists, err := gc.discovery.ServerPreferredResources()
	failed := map[schema.GroupVersion]bool{}
	if err != nil {
		var gerr *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &gerr) || len(lists) == 0 {
			return err
		}
		for gv := range gerr.Groups {
			failed[gv] = true
		}
	}
	kinds := map[schema.GroupKind]mapping{}
	want := map[schema.GroupVersionResource]metav1.APIResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			kinds[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = mapping{gvr: gvr, namespaced: r.Namespaced}
			if ignoredResources[gvr.GroupResource()] || !hasVerbs(r.Verbs, "list", "watch", "delete") {
				continue
			}
			want[gvr] = r
		}
	}

	gc.mu.Lock()
	defer gc.mu.Unlock()
	for gk, m := range gc.kinds {
		if _, ok := kinds[gk]; !ok && failed[m.gvr.GroupVersion()] {
			kinds[gk] = m // keep what a failed group served last time
		}
	}
	gc.kinds = kinds
	for gvr, r := range want {
		if _, ok := gc.watching[gvr]; ok {
			continue
		}
		w, err := gc.watch(ctx, gvr, r.Kind, informers)
		if err != nil {
			return err
		}
		gc.watching[gvr] = w
	}
	for gvr, w := range gc.watching {
		if _, ok := want[gvr]; ok || failed[gvr.GroupVersion()] {
			continue
		}
		w.cancel()
		delete(gc.watching, gvr)
		for _, n := range gc.graph.removeResource(gvr) {
			gc.removed(n)
		}
		gc.log.Info("stopped watching", "resource", gvr.String())
	}
	return nil
}

// watch starts a metadata informer for one resource that feeds the graph.
func (gc *GarbageCollector) watch(ctx context.Context, gvr schema.GroupVersionResource, kind string, informers *sync.WaitGroup) (*watched, error) {
	inf := metadatainformer.NewFilteredMetadataInformer(gc.metadata, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(stripMetadata); err != nil {
		return nil, err
	}
	apiVersion := gvr.GroupVersion().String()
	trigger := triggerResources[gvr.GroupResource()]
	toNode := func(obj any) *node {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil
		}
		return &node{
			gvr: gvr, apiVersion: apiVersion, kind: kind,
			namespace: m.Namespace, name: m.Name, uid: m.UID, rv: m.ResourceVersion,
			owners: m.OwnerReferences, finalizers: m.Finalizers, deleting: m.DeletionTimestamp != nil,
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n := toNode(obj); n != nil {
				gc.changed(gc.graph.put(n), n)
			}
			if trigger {
				gc.requestRediscovery()
			}
		},
		UpdateFunc: func(_, obj any) {
			if n := toNode(obj); n != nil {
				gc.changed(gc.graph.put(n), n)
			}
			if trigger {
				gc.requestRediscovery()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n := toNode(obj); n != nil {
				if old := gc.graph.remove(n.uid); old != nil {
					gc.removed(old)
				}
			}
			if trigger {
				gc.requestRediscovery()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithCancel(ctx)
	informers.Add(1)
	go func() {
		defer informers.Done()
		inf.RunWithContext(ictx)
	}()
	return &watched{apiVersion: apiVersion, kind: kind, informer: inf, cancel: cancel}, nil
}

// stripMetadata keeps only what the graph needs in the informers' stores.
func stripMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields, m.Annotations, m.Labels = nil, nil, nil
	}
	return obj, nil
}

// changed queues what an added or updated object may unblock.
func (gc *GarbageCollector) changed(old, n *node) {
	if n.orphaning() || n.deletingDependents() {
		gc.queue.Add(n.uid)
	}
	ownersChanged := old == nil || !slices.EqualFunc(old.owners, n.owners, sameRef)
	if len(n.owners) > 0 && ownersChanged {
		gc.queue.Add(n.uid)
	}
	if old != nil && (ownersChanged || old.deleting != n.deleting) {
		// An owner waiting for its dependents may now be free.
		gc.queueWaitingOwners(old.owners)
		gc.queueWaitingOwners(n.owners)
	}
}

// removed queues the dependents and waiting owners of an object that is gone.
func (gc *GarbageCollector) removed(old *node) {
	for _, d := range gc.graph.dependentsOf(old.uid) {
		gc.queue.Add(d.uid)
	}
	gc.queueWaitingOwners(old.owners)
}

func (gc *GarbageCollector) queueWaitingOwners(refs []metav1.OwnerReference) {
	for _, r := range refs {
		if o := gc.graph.get(r.UID); o != nil && (o.deletingDependents() || o.orphaning()) {
			gc.queue.Add(o.uid)
		}
	}
}

func sameRef(a, b metav1.OwnerReference) bool {
	return a.UID == b.UID && a.Name == b.Name && a.Kind == b.Kind && a.APIVersion == b.APIVersion &&
		(a.BlockOwnerDeletion != nil && *a.BlockOwnerDeletion) == (b.BlockOwnerDeletion != nil && *b.BlockOwnerDeletion)
}

// mappingFor says how the kind an ownerReference names is served.
func (gc *GarbageCollector) mappingFor(ref metav1.OwnerReference) (mapping, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return mapping{}, fmt.Errorf("ownerReference apiVersion %q: %w", ref.APIVersion, err)
	}
	gc.mu.Lock()
	m, ok := gc.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	gc.mu.Unlock()
	if !ok {
		gc.requestRediscovery()
		return mapping{}, fmt.Errorf("no served resource for kind %s in %s", ref.Kind, ref.APIVersion)
	}
	return m, nil
}

func (gc *GarbageCollector) processNext(ctx context.Context) bool {
	uid, shutdown := gc.queue.Get()
	if shutdown {
		return false
	}
	defer gc.queue.Done(uid)
	if err := gc.process(ctx, uid); err != nil {
		if ctx.Err() == nil {
			gc.log.Debug("retrying", "uid", uid, "err", err)
		}
		gc.queue.AddRateLimited(uid)
		return true
	}
	gc.queue.Forget(uid)
	return true
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
