package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sproxy "k8s.io/kubernetes/pkg/proxy"
	proxyconfig "k8s.io/kubernetes/pkg/proxy/config"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
)

// resyncPeriod is how often the proxy syncs without a change (a retry after a failed sync
// comes sooner: retryPeriod).
const (
	resyncPeriod = time.Minute
	retryPeriod  = time.Second
	// minSyncPeriod is the least time between the starts of two syncs: changes that arrive
	// while a sync runs or within this time of its start are folded into the next one, so a
	// burst of EndpointSlice changes costs a few syncs, not one each (kube-proxy's nftables
	// mode waits 1 s). 1,000 Services x 10 endpoints with 100 changes/s on a quiet machine:
	// syncing every change 0.5 core, p99 18 ms; 50 ms 0.14 core, p99 66 ms (bench/README
	// "Service proxy: coalesced syncs").
	minSyncPeriod = 50 * time.Millisecond
)

// Proxier programs the node's Services; New prepares it, Run runs it.
type Proxier struct {
	o      Options
	p      parsed
	log    *slog.Logger
	prog   *programmer
	routes *routes
	ct     conntrack.Interface

	svcTracker *k8sproxy.ServiceChangeTracker
	epTracker  *k8sproxy.EndpointsChangeTracker
	kick       chan struct{}

	mu         sync.Mutex
	svcSynced  bool
	epsSynced  bool
	sliceRVs   map[string]map[string]string // service ns/name → slice name → resourceVersion
	svcMap     k8sproxy.ServicePortMap
	epMap      k8sproxy.EndpointsMap
	report     []portReport
	lastSync   time.Time
	lastErr    string
	syncs      int
	metrics    *metrics
	changeTime map[string]time.Time // service ns/name → first unsynced change seen (informer time)
	cache      *portCache           // each Service port's desired content, while it does not change
	warned     map[string]string    // slice ns/name → resourceVersion whose ignored addresses were reported
}

// New checks the options and the node: nftables usable (the table and its base chains are
// made here), forwarding and bridge netfilter on, the Service CIDR's unreachable route in
// place. Without nftables (or with Options.Probe failing) the error wraps ErrNoNFTables.
func New(o Options) (*Proxier, error) {
	o.defaults()
	p, err := o.parse()
	if err != nil {
		return nil, err
	}
	if o.Probe != nil {
		if err := o.Probe(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoNFTables, err)
		}
	}
	prog, err := newProgrammer(o.Table, p.nodeIP, p.localnetBridge)
	if err != nil {
		return nil, err
	}
	if err := prog.setup(); err != nil {
		return nil, err
	}
	if p.localnetBridge != "" { // after setup: the guard is in place
		if _, err := setRouteLocalnet(p.localnetBridge, true); err != nil {
			return nil, err
		}
	}
	if err := setSysctls(); err != nil {
		return nil, err
	}
	if err := ensureUnreachable(p.serviceCIDR); err != nil {
		return nil, err
	}
	rt, err := newRoutes(p.serviceCIDR)
	if err != nil {
		return nil, err
	}
	px := &Proxier{o: o, p: p, log: o.Log.With("component", "service-proxy", "table", o.Table), prog: prog, routes: rt,
		ct: conntrack.New(), kick: make(chan struct{}, 1), sliceRVs: map[string]map[string]string{},
		svcMap: k8sproxy.ServicePortMap{}, epMap: k8sproxy.EndpointsMap{}, metrics: newMetrics(),
		changeTime: map[string]time.Time{}, cache: newPortCache(), warned: map[string]string{}}
	px.svcTracker = k8sproxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	px.epTracker = k8sproxy.NewEndpointsChangeTracker(v1.IPv4Protocol, o.NodeName, nil, nil)
	return px, nil
}

// Run watches Services and EndpointSlices and keeps the table in step until ctx ends (the
// rules stay in the kernel after it: a restarted agent takes them over without a gap).
func (px *Proxier) Run(ctx context.Context) error {
	svcFactory := informers.NewSharedInformerFactoryWithOptions(px.o.Client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = "!service.kubernetes.io/service-proxy-name"
	}))
	epFactory := informers.NewSharedInformerFactoryWithOptions(px.o.Client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = "!" + v1.IsHeadlessService
	}))
	sc := proxyconfig.NewServiceConfig(ctx, svcFactory.Core().V1().Services(), 0)
	sc.RegisterEventHandler(px)
	ec := proxyconfig.NewEndpointSliceConfig(ctx, epFactory.Discovery().V1().EndpointSlices(), 0)
	ec.RegisterEventHandler(px)
	svcFactory.Start(ctx.Done())
	epFactory.Start(ctx.Done())
	go sc.Run(ctx.Done())
	go ec.Run(ctx.Done())
	defer svcFactory.Shutdown()
	defer epFactory.Shutdown()
	px.log.Info("Service proxy started", "nodeIP", px.o.NodeIP, "serviceCIDR", px.p.serviceCIDR, "clusterCIDR", px.o.ClusterCIDR,
		"loopbackAPIServer", px.o.APIServer, "bridge", px.o.Bridge)
	if b := px.p.localnetBridge; b != "" {
		watchCtx, stopWatch := context.WithCancel(ctx)
		var watching sync.WaitGroup
		watching.Go(func() { watchBridge(watchCtx, b, px.log) })
		defer watching.Wait()
		defer stopWatch()
	}

	timer := time.NewTimer(resyncPeriod)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-px.kick:
		case <-timer.C:
		}
		if wait := minSyncPeriod - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			select { // what kicked meanwhile is in this sync
			case <-px.kick:
			default:
			}
		}
		last = time.Now()
		next := resyncPeriod
		if px.ready() {
			if err := px.sync(); err != nil {
				px.log.Error("sync of the Service rules failed; retrying", "err", err)
				next = retryPeriod
			}
		}
		timer.Reset(next)
	}
}

// LastSync is when the Service rules were last synced into the kernel; false before the
// first sync.
func (px *Proxier) LastSync() (time.Time, bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.lastSync, !px.lastSync.IsZero()
}

func (px *Proxier) ready() bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.svcSynced && px.epsSynced
}

func (px *Proxier) trigger() {
	select {
	case px.kick <- struct{}{}:
	default:
	}
}

// sync folds the trackers' changes into the maps and programs the difference.
func (px *Proxier) sync() error {
	start := time.Now()
	px.mu.Lock()
	defer px.mu.Unlock()
	px.svcMap.Update(px.svcTracker)
	epResult := px.epMap.Update(px.epTracker)
	d := buildDesiredCached(px.svcMap, px.epMap, px.o.NodeName, px.p, px.cache)
	st, err := px.prog.apply(d)
	px.syncs++
	if err != nil {
		px.lastErr = err.Error()
		px.metrics.syncErrors.Inc()
		// The trackers' changes are in the maps already; the next sync re-applies them.
		return err
	}
	if rerr := px.routes.sync(d.clusterIPs); rerr != nil {
		px.log.Warn("ClusterIP routes", "err", rerr)
	}
	if b := px.p.localnetBridge; b != "" {
		ensureLocalnet(b, px.log)
	}
	if epResult.ConntrackCleanupRequired {
		conntrack.CleanStaleEntries(px.ct, v1.IPv4Protocol, px.svcMap, px.epMap)
	}
	done := time.Now()
	px.metrics.observeSync(done.Sub(start), d, done)
	for _, times := range epResult.LastChangeTriggerTimes {
		for _, t := range times {
			px.metrics.programming.Observe(done.Sub(t).Seconds())
		}
	}
	var changed []string
	for svc, t := range px.changeTime {
		px.metrics.changeToKernel.Observe(done.Sub(t).Seconds())
		delete(px.changeTime, svc)
		changed = append(changed, svc)
	}
	if px.o.Synced != nil && len(changed) > 0 {
		px.o.Synced(SyncEvent{At: done, Took: done.Sub(start), Services: changed,
			Chains: st.chainsWritten + st.chainsDeleted, Elements: st.elementsChanged})
	}
	px.report, px.lastSync, px.lastErr = append([]portReport(nil), d.report...), done, ""
	if st.chainsWritten+st.chainsDeleted+st.elementsChanged > 0 {
		px.log.Debug("Service rules synced", "chainsWritten", st.chainsWritten, "chainsDeleted", st.chainsDeleted,
			"elementsChanged", st.elementsChanged, "took", done.Sub(start))
	}
	return nil
}

// skip says the proxy leaves the Service alone (the node-local DNS's).
func skip(s *v1.Service) bool { return s != nil && s.Annotations[SkipAnnotation] == "true" }

func orNil(s *v1.Service) *v1.Service {
	if skip(s) {
		return nil
	}
	return s
}

func (px *Proxier) noteChange(key string) {
	px.mu.Lock()
	if _, ok := px.changeTime[key]; !ok {
		px.changeTime[key] = time.Now()
	}
	px.mu.Unlock()
}

// OnServiceAdd and the rest are the informers' handlers (pkg/proxy/config).
func (px *Proxier) OnServiceAdd(s *v1.Service) { px.OnServiceUpdate(nil, s) }

func (px *Proxier) OnServiceUpdate(old, s *v1.Service) {
	if px.svcTracker.Update(orNil(old), orNil(s)) {
		px.noteChange(s.Namespace + "/" + s.Name)
		px.trigger()
	}
}

func (px *Proxier) OnServiceDelete(s *v1.Service) {
	if px.svcTracker.Update(orNil(s), nil) {
		px.noteChange(s.Namespace + "/" + s.Name)
		px.trigger()
	}
}

func (px *Proxier) OnServiceSynced() {
	px.mu.Lock()
	px.svcSynced = true
	px.mu.Unlock()
	px.trigger()
}

func (px *Proxier) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) { px.sliceChanged(s, false) }

func (px *Proxier) OnEndpointSliceUpdate(_, s *discoveryv1.EndpointSlice) { px.sliceChanged(s, false) }

func (px *Proxier) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) { px.sliceChanged(s, true) }

func (px *Proxier) OnEndpointSlicesSynced() {
	px.mu.Lock()
	px.epsSynced = true
	px.mu.Unlock()
	px.trigger()
}

func (px *Proxier) sliceChanged(s *discoveryv1.EndpointSlice, removed bool) {
	svc := s.Labels[discoveryv1.LabelServiceName]
	key := fmt.Sprintf("%s/%s", s.Namespace, svc)
	px.mu.Lock()
	rvs := px.sliceRVs[key]
	if rvs == nil {
		rvs = map[string]string{}
		px.sliceRVs[key] = rvs
	}
	if removed {
		delete(rvs, s.Name)
		if len(rvs) == 0 {
			delete(px.sliceRVs, key)
		}
		delete(px.warned, s.Namespace+"/"+s.Name)
	} else {
		rvs[s.Name] = s.ResourceVersion
	}
	px.mu.Unlock()
	if !removed {
		s = px.withoutBogus(s)
	}
	if px.epTracker.EndpointSliceUpdate(s, removed) {
		px.noteChange(key)
		px.trigger()
	}
}

var (
	_ proxyconfig.ServiceHandler       = (*Proxier)(nil)
	_ proxyconfig.EndpointSliceHandler = (*Proxier)(nil)
)
