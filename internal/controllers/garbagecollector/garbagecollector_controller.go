package garbagecollector

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// IdleProbePeriod is how often the custom resources that had no object are listed
	// again (limit=1) to find out whether they have some now: at most
	// MaxIdleProbesPerPeriod of them each period, in turn, so that thousands of unused CRDs
	// cost a steady trickle of requests, not a burst of thousands every period (each one
	// is then probed every ceil(idle/MaxIdleProbesPerPeriod) periods). Default 30 s.
	IdleProbePeriod time.Duration
	// MaxIdleProbesPerPeriod bounds the idle probes of one period. Default 300 (10 a second
	// at the default period: 5,000 idle CRDs are each probed every 8.5 minutes).
	MaxIdleProbesPerPeriod int
	// Hints, when set, names resources that were just given an object the collector must
	// see (one with ownerReferences or a garbage-collection finalizer): an idle custom
	// resource named there is watched at once instead of at the next idle probe. The API
	// server sends them for the writes it serves; writes served by other servers are found
	// by the idle probes.
	Hints <-chan schema.GroupResource
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
	if o.MaxIdleProbesPerPeriod <= 0 {
		o.MaxIdleProbesPerPeriod = 300
	}
	if o.IdleProbePeriod <= 0 {
		o.IdleProbePeriod = 30 * time.Second
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

// crdResource is the CustomResourceDefinitions resource: its object names
// (<plural>.<group>) say which resources are custom.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// probeWorkers bounds the concurrent limit=1 lists of idle resources.
const probeWorkers = 4

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
	cfg      *rest.Config
	o        Options
	dynamic  dynamic.Interface
	metadata metadata.Interface
	http     *http.Client // for the discovery ETags
	log      *slog.Logger

	graph *graph
	// absent holds owners confirmed gone by a live GET ("uid/namespace"); UIDs are never
	// reused, so an entry never goes stale.
	absent *lru.Cache
	queue  workqueue.TypedRateLimitingInterface[types.UID]
	events events.EventRecorder

	mu       sync.Mutex
	kinds    map[schema.GroupKind]mapping
	watching map[schema.GroupVersionResource]*watched
	// idle are the served custom resources not watched because they had no object when
	// last looked at (by preferred resource). A CRD nobody uses thus costs no informer, no
	// watch and no server-side watch cache.
	idle map[schema.GroupVersionResource]metav1.APIResource
	// activate holds idle resources to watch now (an ownerReference names their kind, or a
	// hint named them); wake tells the discovery loop.
	activate map[schema.GroupVersionResource]bool
	wake     chan struct{}
	// rediscover asks the discovery loop to run now.
	rediscover chan struct{}
	// discovered holds the ETags of the aggregated discovery documents the last complete
	// resync acted on: while they are the same, resyncing would change nothing. Owned by
	// the discovery loop.
	discovered string
	// lastProbed is the idle resource the last idle probe ended with (nextProbes).
	lastProbed string
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
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &GarbageCollector{cfg: cfg, o: o, dynamic: dyn, metadata: md, http: hc, log: o.Log}, nil
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
	gc.idle = map[schema.GroupVersionResource]metav1.APIResource{}
	gc.activate = map[schema.GroupVersionResource]bool{}
	gc.wake = make(chan struct{}, 1)
	gc.rediscover = make(chan struct{}, 1)
	gc.discovered, gc.lastProbed = "", ""
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
	probe := time.NewTicker(gc.o.IdleProbePeriod)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case gr := <-gc.o.Hints:
			gc.hint(gr)
			continue
		case <-gc.wake:
			if err := gc.watchActivated(ctx, &informers); err != nil && ctx.Err() == nil {
				gc.log.Warn("watch", "err", err)
			}
			continue
		case <-probe.C:
			if err := gc.probeIdle(ctx, &informers); err != nil && ctx.Err() == nil {
				gc.log.Warn("idle probe", "err", err)
			}
			continue
		case <-ticker.C:
		case <-gc.rediscover:
			if !gc.settle(ctx, &informers) {
				return nil
			}
		}
		if err := gc.resync(ctx, &informers); err != nil && ctx.Err() == nil {
			gc.log.Warn("discovery", "err", err)
		}
	}
}

// Rediscovery waits for a burst of CRD changes to settle: until none came for
// rediscoverQuiet, at most rediscoverMaxWait after the first. Creating thousands of CRDs
// thus costs a handful of discoveries (each megabytes to decode at that size), not one a
// second.
const (
	rediscoverQuiet   = time.Second
	rediscoverMaxWait = 10 * time.Second
)

// settle waits as the constants above say, serving hints and activations meanwhile. It
// returns false when ctx ends.
func (gc *GarbageCollector) settle(ctx context.Context, informers *sync.WaitGroup) bool {
	quiet := time.NewTimer(rediscoverQuiet)
	defer quiet.Stop()
	limit := time.NewTimer(rediscoverMaxWait)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case gr := <-gc.o.Hints:
			gc.hint(gr)
		case <-gc.wake:
			if err := gc.watchActivated(ctx, informers); err != nil && ctx.Err() == nil {
				gc.log.Warn("watch", "err", err)
			}
		case <-gc.rediscover:
			quiet.Reset(rediscoverQuiet)
		case <-quiet.C:
			return true
		case <-limit.C:
			return true
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
	// With thousands of CRDs a discovery is megabytes to decode: skip it (and the resync,
	// which would find the same resources) while the server's discovery is unchanged.
	tags, tagErr := gc.discoveryTags(ctx)
	if tagErr == nil && tags == gc.discovered {
		return nil
	}
	lists, failed, err := gc.preferredResources(ctx)
	if err != nil {
		return err
	}
	kinds := map[schema.GroupKind]mapping{}
	want := map[schema.GroupVersionResource]metav1.APIResource{}
	for _, l := range lists {
		for _, r := range l.resources {
			gvr := l.gv.WithResource(r.Name)
			kinds[schema.GroupKind{Group: l.gv.Group, Kind: r.Kind}] = mapping{gvr: gvr, namespaced: r.Namespaced}
			if ignoredResources[gvr.GroupResource()] || !hasVerbs(r.Verbs, "list", "watch", "delete") {
				continue
			}
			want[gvr] = r
		}
	}

	gc.mu.Lock()
	for gk, m := range gc.kinds {
		if _, ok := kinds[gk]; !ok && failed[m.gvr.GroupVersion()] {
			kinds[gk] = m // keep what a failed group served last time
		}
	}
	gc.kinds = kinds
	// The CRDs come first: their names say which of the other resources are custom.
	crds, err := gc.ensureWatched(ctx, crdResource, want, informers)
	gc.mu.Unlock()
	if err != nil {
		return err
	}
	if crds != nil && !cache.WaitForCacheSync(ctx.Done(), crds.informer.HasSynced) {
		return ctx.Err()
	}

	gc.mu.Lock()
	var fresh []schema.GroupVersionResource
	for gvr, r := range want {
		if _, ok := gc.watching[gvr]; ok {
			continue
		}
		if _, ok := gc.idle[gvr]; ok {
			continue
		}
		if crds != nil && gc.isCustom(crds, gvr.GroupResource()) {
			// Watched once it has objects: found by a probe now and every
			// IdleProbePeriod, or at once by an ownerReference or a hint.
			gc.idle[gvr] = r
			fresh = append(fresh, gvr)
			continue
		}
		if _, err := gc.ensureWatched(ctx, gvr, want, informers); err != nil {
			gc.mu.Unlock()
			return err
		}
	}
	for gvr := range gc.idle {
		if _, ok := want[gvr]; !ok && !failed[gvr.GroupVersion()] {
			delete(gc.idle, gvr)
		}
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
	gc.mu.Unlock()
	// New idle resources are probed now on the term's first resync (objects may exist
	// already) and when there are few; a burst of new CRDs joins the periodic probes
	// instead of costing thousands of requests at once (this server's own writes to them
	// hint at once anyway).
	if gc.discovered == "" || len(fresh) <= gc.o.MaxIdleProbesPerPeriod {
		if err := gc.probe(ctx, fresh, informers); err != nil {
			return err
		}
	}
	if tagErr == nil && len(failed) == 0 {
		gc.discovered = tags
	}
	return nil
}

// isCustom says whether a resource is served by a CRD (its name is <plural>.<group>).
// Called with gc.mu held.
func (gc *GarbageCollector) isCustom(crds *watched, gr schema.GroupResource) bool {
	_, ok, _ := crds.informer.GetStore().GetByKey(gr.Resource + "." + gr.Group)
	return ok
}

// ensureWatched starts watching gvr if it is served (in want) and not watched yet, and
// returns its informer (nil if not served). Called with gc.mu held.
func (gc *GarbageCollector) ensureWatched(ctx context.Context, gvr schema.GroupVersionResource, want map[schema.GroupVersionResource]metav1.APIResource, informers *sync.WaitGroup) (*watched, error) {
	if w, ok := gc.watching[gvr]; ok {
		return w, nil
	}
	r, ok := want[gvr]
	if !ok {
		return nil, nil
	}
	w, err := gc.watch(ctx, gvr, r.Kind, informers)
	if err != nil {
		return nil, err
	}
	gc.watching[gvr] = w
	delete(gc.idle, gvr)
	return w, nil
}

// probe lists each of gvrs with limit=1 (answered by etcd, so no watch cache starts for an
// empty resource) and watches those that have an object.
func (gc *GarbageCollector) probe(ctx context.Context, gvrs []schema.GroupVersionResource, informers *sync.WaitGroup) error {
	if len(gvrs) == 0 {
		return nil
	}
	var found sync.Map
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(probeWorkers)
	for _, gvr := range gvrs {
		g.Go(func() error {
			l, err := gc.metadata.Resource(gvr).List(gctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
					return nil // gone meanwhile; the next discovery drops it
				}
				return fmt.Errorf("list %s: %w", gvr, err)
			}
			if len(l.Items) > 0 {
				found.Store(gvr, true)
			}
			return nil
		})
	}
	err := g.Wait()
	gc.mu.Lock()
	found.Range(func(k, _ any) bool {
		gc.activate[k.(schema.GroupVersionResource)] = true
		return true
	})
	gc.mu.Unlock()
	if werr := gc.watchActivated(ctx, informers); err == nil {
		err = werr
	}
	return err
}

// probeIdle probes every idle resource.
func (gc *GarbageCollector) probeIdle(ctx context.Context, informers *sync.WaitGroup) error {
	gc.mu.Lock()
	gvrs := make([]schema.GroupVersionResource, 0, len(gc.idle))
	for gvr := range gc.idle {
		gvrs = append(gvrs, gvr)
	}
	gc.mu.Unlock()
	return gc.probe(ctx, gc.nextProbes(gvrs), informers)
}

// nextProbes picks this period's share of the idle resources: the next
// Options.MaxIdleProbesPerPeriod after the last one probed, in a stable order. Owned by the
// discovery loop.
func (gc *GarbageCollector) nextProbes(idle []schema.GroupVersionResource) []schema.GroupVersionResource {
	n := gc.o.MaxIdleProbesPerPeriod
	if len(idle) <= n {
		return idle
	}
	key := func(r schema.GroupVersionResource) string { return r.Group + "/" + r.Version + "/" + r.Resource }
	slices.SortFunc(idle, func(a, b schema.GroupVersionResource) int { return strings.Compare(key(a), key(b)) })
	// Start after the last resource probed (it may have left the idle set meanwhile).
	start, _ := slices.BinarySearchFunc(idle, gc.lastProbed, func(r schema.GroupVersionResource, last string) int {
		return strings.Compare(key(r), last)
	})
	if start < len(idle) && key(idle[start]) == gc.lastProbed {
		start++
	}
	out := make([]schema.GroupVersionResource, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, idle[(start+i)%len(idle)])
	}
	gc.lastProbed = key(out[len(out)-1])
	return out
}

// watchActivated starts watching the idle resources queued in gc.activate.
func (gc *GarbageCollector) watchActivated(ctx context.Context, informers *sync.WaitGroup) error {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for gvr := range gc.activate {
		delete(gc.activate, gvr)
		r, ok := gc.idle[gvr]
		if !ok {
			continue
		}
		w, err := gc.watch(ctx, gvr, r.Kind, informers)
		if err != nil {
			return err
		}
		gc.watching[gvr] = w
		delete(gc.idle, gvr)
		gc.log.Info("watching", "resource", gvr.String())
	}
	return nil
}

// hint handles a server hint: an idle resource named there is watched now.
func (gc *GarbageCollector) hint(gr schema.GroupResource) {
	gc.mu.Lock()
	queued := false
	for gvr := range gc.idle {
		if gvr.GroupResource() == gr {
			gc.activate[gvr], queued = true, true
		}
	}
	gc.mu.Unlock()
	if queued {
		gc.wakeUp()
	}
}

// activateKinds queues the idle resources of the kinds refs name: an owner's deletion
// must be seen.
func (gc *GarbageCollector) activateKinds(refs []metav1.OwnerReference) {
	queued := false
	gc.mu.Lock()
	for _, r := range refs {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			continue
		}
		m, ok := gc.kinds[schema.GroupKind{Group: gv.Group, Kind: r.Kind}]
		if !ok {
			continue
		}
		if _, idle := gc.idle[m.gvr]; idle && !gc.activate[m.gvr] {
			gc.activate[m.gvr], queued = true, true
		}
	}
	gc.mu.Unlock()
	if queued {
		gc.wakeUp()
	}
}

func (gc *GarbageCollector) wakeUp() {
	select {
	case gc.wake <- struct{}{}:
	default:
	}
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
		gc.activateKinds(n.owners)
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
