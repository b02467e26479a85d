package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/clock"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// Options configure a Scheduler.
type Options struct {
	// Config is the KubeSchedulerConfiguration (profiles, plugins, weights,
	// percentageOfNodesToScore, parallelism); nil is upstream's default.
	Config *config.KubeSchedulerConfiguration
	// Registerer receives the scheduler_* metrics; nil registers none.
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// NoEquivalenceCache turns off the reuse of Filter verdicts and raw scores between
	// consecutive pods of one signature (equiv.go); decisions are the same either way.
	NoEquivalenceCache bool
}

// Scheduler places pods on nodes. New prepares it; Start runs one leadership term.
type Scheduler struct {
	restConfig *rest.Config
	conf       *config.KubeSchedulerConfiguration
	log        *slog.Logger
	metrics    *metrics
	noEquiv    bool
	equiv      atomic.Pointer[equivCache] // the last leadership term's
}

// EquivalenceCacheStats counts, for the current or last leadership term, the Filter
// verdicts and per-node raw score sets the equivalence cache answered (hits) and the ones
// the plugins computed for it (misses); cycles the cache did not apply to count in neither.
func (s *Scheduler) EquivalenceCacheStats() (filterHits, filterMisses, scoreHits, scoreMisses int64) {
	c := s.equiv.Load()
	if c == nil {
		return
	}
	return c.filterHits.Load(), c.filterMisses.Load(), c.scoreHits.Load(), c.scoreMisses.Load()
}

// New checks the configuration and registers the metrics; it starts nothing.
func New(cfg *rest.Config, o Options) (*Scheduler, error) {
	conf := o.Config
	if conf == nil {
		var err error
		if conf, err = DefaultConfig(); err != nil {
			return nil, err
		}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var names []string
	for _, p := range conf.Profiles {
		names = append(names, p.SchedulerName)
	}
	m, err := newMetrics(o.Registerer, names)
	if err != nil {
		return nil, fmt.Errorf("scheduler metrics: %w", err)
	}
	// The framework runtime records into upstream's metric variables; they must exist
	// (registered in component-base's legacy registry, which Kube does not serve).
	schedmetrics.Register()
	rc := rest.CopyConfig(cfg)
	// The loopback connection is not rate limited on the client (the server's own flow
	// control applies); kube-scheduler's clientConnection qps/burst are not used.
	rc.QPS, rc.Burst = -1, 0
	// kube-scheduler's clientConnection.contentType default: informers of 100,000 pods
	// decode protobuf several times faster than JSON.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return &Scheduler{restConfig: rc, conf: conf, log: o.Log, metrics: m, noEquiv: o.NoEquivalenceCache}, nil
}

// run is one leadership term's state: informers, profiles, queue, cache and snapshot.
type run struct {
	s          *Scheduler
	client     kubernetes.Interface
	log        *slog.Logger
	profiles   map[string]framework.Framework
	queue      *queue
	cache      *nodeCache
	snap       *snapshot
	equiv      *equivCache // nil: off
	podLister  corelisters.PodLister
	percentage *int32
	nextStart  int
	statusBuf  []*fwk.Status // filter's, reused
	binds      sync.WaitGroup
	bindSlots  chan struct{} // one per binding cycle past Permit (maxBindsInFlight)
	clock      clock.WithTicker
}

// Start schedules until ctx ends. It may be called again for a new leadership term: all
// state is made afresh.
func (s *Scheduler) Start(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(s.restConfig)
	if err != nil {
		return err
	}
	logger := logr.FromSlogHandler(s.log.Handler())
	ctx = klog.NewContext(ctx, logger)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	factory := informers.NewSharedInformerFactory(client, 0)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	defer broadcaster.Shutdown()

	r := &run{s: s, client: client, log: s.log, profiles: map[string]framework.Framework{}, cache: newNodeCache(), snap: newSnapshot(),
		podLister: factory.Core().V1().Pods().Lister(), percentage: s.conf.PercentageOfNodesToScore, clock: clock.RealClock{},
		bindSlots: make(chan struct{}, maxBindsInFlight)}
	if !s.noEquiv {
		r.equiv = newEquivCache()
		s.equiv.Store(r.equiv)
	}

	var draManager fwk.SharedDRAManager
	if utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		claims := assumecache.NewAssumeCache(logger, factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		opts := resourceslicetracker.Options{
			EnableDeviceTaintRules:   utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
			EnableConsumableCapacity: utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
			SliceInformer:            factory.Resource().V1().ResourceSlices(),
			KubeClient:               client,
		}
		if opts.EnableDeviceTaintRules {
			opts.TaintInformer = factory.Resource().V1().DeviceTaintRules()
		}
		tracker, err := resourceslicetracker.StartTracker(ctx, opts)
		if err != nil {
			return fmt.Errorf("resource slice tracker: %w", err)
		}
		draManager = dynamicresources.NewDRAManager(ctx, claims, tracker, factory)
	}

	hooks := map[string]*queueHooks{}
	waiting, preBind := frameworkruntime.NewWaitingPodsMap(), frameworkruntime.NewPodsInPreBindMap()
	var less fwk.LessFunc
	for i := range s.conf.Profiles {
		p := &s.conf.Profiles[i]
		f, plugins, err := newProfile(ctx, p,
			frameworkruntime.WithClientSet(client),
			frameworkruntime.WithKubeConfig(s.restConfig),
			frameworkruntime.WithInformerFactory(factory),
			frameworkruntime.WithEventRecorder(broadcaster.NewRecorder(scheme.Scheme, p.SchedulerName)),
			frameworkruntime.WithSnapshotSharedLister(r.snap),
			frameworkruntime.WithMutableSnapshotLister(r.snap),
			frameworkruntime.WithSharedDRAManager(draManager),
			frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
			frameworkruntime.WithParallelism(parallelism(s.conf.Parallelism)),
			frameworkruntime.WithLogger(logger),
			frameworkruntime.WithWaitingPods(waiting),
			frameworkruntime.WithPodsInPreBind(preBind),
		)
		if err != nil {
			return fmt.Errorf("profile %q: %w", p.SchedulerName, err)
		}
		defer f.Close()
		r.profiles[p.SchedulerName] = f
		r.equiv.register(p.SchedulerName, plugins)
		h := &queueHooks{preEnqueue: f.PreEnqueuePlugins(), events: map[string][]fwk.ClusterEventWithHint{}}
		for _, ext := range f.EnqueueExtensions() {
			evs, err := ext.EventsToRegister(ctx)
			if err != nil {
				return fmt.Errorf("profile %q: plugin %s events: %w", p.SchedulerName, ext.Name(), err)
			}
			h.events[ext.Name()] = evs
		}
		hooks[p.SchedulerName] = h
		if less == nil {
			less = f.QueueSortFunc()
		}
	}
	r.queue = newQueue(less, hooks, r.clock, s.metrics)
	for _, f := range r.profiles {
		f.SetPodNominator(r.queue)
		f.SetPodActivator(r.queue)
	}
	if err := r.addHandlers(factory, hooks); err != nil {
		return err
	}
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("scheduler: informer for %v did not sync", typ)
		}
	}
	s.log.Info("scheduler started", "profiles", len(r.profiles))

	var wg sync.WaitGroup
	wg.Go(func() { r.queue.run(ctx) })
	for ctx.Err() == nil {
		r.scheduleOne(ctx)
	}
	wg.Wait()
	r.binds.Wait()
	return nil
}

// parallelism is the configured parallelism (kube-scheduler's default 16) capped at
// GOMAXPROCS: more workers than processors only take turns on them (the plugins do not
// block), each Until call starting and preempting goroutines that have no processor.
func parallelism(configured int32) int {
	return max(1, min(int(configured), runtime.GOMAXPROCS(0)))
}

// maxBindsInFlight bounds the binding cycles that talk to the server at once. Past the
// server's HTTP/2 stream limit (Go's default 250) the client opens another TLS connection
// per excess request — a handshake each, several milliseconds of CPU — and a server that
// is behind gains nothing from more requests waiting in it; the cycles wait here instead
// (scheduling goes on: the pods are assumed).
const maxBindsInFlight = 100

// errNoNodes is upstream's ErrNoNodesAvailable.
var errNoNodes = errors.New("no nodes available to schedule pods")

// handler wraps informer callbacks so that no odd object can crash the server.
func (r *run) handler(add func(any), update func(any, any), del func(any)) cache.ResourceEventHandler {
	guard := func(what string) {
		if p := recover(); p != nil {
			r.log.Error("scheduler event handler panicked", "event", what, "panic", fmt.Sprint(p))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			defer guard("add")
			add(o)
		},
		UpdateFunc: func(o, n any) {
			defer guard("update")
			update(o, n)
		},
		DeleteFunc: func(o any) {
			defer guard("delete")
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			del(o)
		},
	}
}
