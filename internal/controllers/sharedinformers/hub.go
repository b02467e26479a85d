package sharedinformers

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Hub is one shared informer factory for the controllers leading on a server. See the
// package documentation. The zero Hub is not usable; make one with NewHub.
type Hub struct {
	client kubernetes.Interface

	mu  sync.Mutex
	cur *term // nil while no controller leads
}

// term is the life of one set of shared informers: from the first view taken while none
// was open to the shutdown of the last.
type term struct {
	factory informers.SharedInformerFactory
	ctx     context.Context // the informers run until it ends
	stop    context.CancelFunc
	views   int
}

// NewHub makes a hub whose informers list and watch through client.
func NewHub(client kubernetes.Interface) *Hub { return &Hub{client: client} }

// Factory returns a view of the shared factory for one leadership term. The caller must
// call its Shutdown when the term ends.
func (h *Hub) Factory() informers.SharedInformerFactory {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		ctx, stop := context.WithCancel(context.Background())
		h.cur = &term{factory: informers.NewSharedInformerFactory(h.client, 0), ctx: ctx, stop: stop}
	}
	h.cur.views++
	return &view{hub: h, term: h.cur}
}

// release ends a view; the last one stops the term's informers and waits for them.
func (h *Hub) release(t *term) {
	h.mu.Lock()
	t.views--
	last := t.views == 0
	if last && h.cur == t {
		h.cur = nil
	}
	h.mu.Unlock()
	if last {
		t.stop()
		t.factory.Shutdown()
	}
}

type hubKey struct{}

// NewContext returns ctx carrying hub, for the controllers started with it (For).
func NewContext(ctx context.Context, hub *Hub) context.Context {
	return context.WithValue(ctx, hubKey{}, hub)
}

// For returns a view of the hub ctx carries (NewContext), or, without one, a factory of
// the controller's own over client (a controller run on its own, as in its tests). Either
// way the caller starts it with Start and ends it with Shutdown.
func For(ctx context.Context, client kubernetes.Interface) informers.SharedInformerFactory {
	if h, ok := ctx.Value(hubKey{}).(*Hub); ok && h != nil {
		return h.Factory()
	}
	return informers.NewSharedInformerFactory(client, 0)
}

// view is one leadership term's window on the hub's factory.
type view struct {
	hub  *Hub
	term *term

	mu      sync.Mutex
	started bool
	done    bool
	pending []*registration // added before Start, registered at Start
	regs    []*registration // registered with the informers
}

// registration is a handler added through a view. Handlers added before the view's Start
// reach the informer only at Start: an upstream constructor adds its handlers before it
// has finished building its controller (the Deployment controller sets its enqueue
// function after), and a shared informer that already runs would call them at once with
// its cached objects — as kube-controller-manager's never does, since it starts the
// informers after building every controller.
type registration struct {
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandler
	options  cache.HandlerOptions

	bound  chan struct{} // closed once handle is set
	handle cache.ResourceEventHandlerRegistration
	synced chan struct{} // closed once handle has synced
}

var _ cache.ResourceEventHandlerRegistration = (*registration)(nil)

// HasSynced reports whether the handler has been registered and got the informer's
// initial objects.
func (r *registration) HasSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}

func (r *registration) HasSyncedChecker() cache.DoneChecker { return r }

// Name and Done make the registration its own DoneChecker.
func (r *registration) Name() string          { return "shared informer handler" }
func (r *registration) Done() <-chan struct{} { return r.synced }

// bind registers the handler with its informer.
func (r *registration) bind() error {
	h, err := r.informer.AddEventHandlerWithOptions(r.handler, r.options)
	if err != nil {
		return err
	}
	r.handle = h
	close(r.bound)
	go func() {
		<-h.HasSyncedChecker().Done()
		close(r.synced)
	}()
	return nil
}

var _ informers.SharedInformerFactory = (*view)(nil)

// Start registers the handlers added so far and starts the informers requested so far.
// The informers run for the hub's term, not until stopCh closes: other controllers may be
// using them.
func (v *view) Start(<-chan struct{}) {
	v.mu.Lock()
	pending := v.pending
	v.pending = nil
	if !v.done {
		v.started = true
	}
	v.mu.Unlock()
	for _, r := range pending {
		v.register(r)
	}
	v.term.factory.StartWithContext(v.term.ctx)
}

// StartWithContext is Start.
func (v *view) StartWithContext(ctx context.Context) { v.Start(ctx.Done()) }

// Shutdown removes the event handlers added through this view and releases the
// informers. It may be called more than once.
func (v *view) Shutdown() {
	v.mu.Lock()
	if v.done {
		v.mu.Unlock()
		return
	}
	v.done = true
	regs := v.regs
	v.regs, v.pending = nil, nil
	v.mu.Unlock()
	for _, r := range regs {
		_ = r.informer.RemoveEventHandler(r.handle) // fails only on a stopped informer: nothing to remove then
	}
	v.hub.release(v.term)
}

// add takes a handler added through the view: held until Start, registered at once after.
func (v *view) add(i cache.SharedIndexInformer, h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	r := &registration{informer: i, handler: h, options: o, bound: make(chan struct{}), synced: make(chan struct{})}
	v.mu.Lock()
	switch {
	case v.done:
		v.mu.Unlock()
		return nil, fmt.Errorf("shared informers: handler added after the leadership term ended")
	case !v.started:
		v.pending = append(v.pending, r)
		v.mu.Unlock()
		return r, nil
	}
	v.mu.Unlock()
	if err := v.register(r); err != nil {
		return nil, err
	}
	return r, nil
}

// register binds r to its informer and records it for Shutdown (or undoes it when the
// view has shut down meanwhile).
func (v *view) register(r *registration) error {
	if err := r.bind(); err != nil {
		return err
	}
	v.mu.Lock()
	done := v.done
	if !done {
		v.regs = append(v.regs, r)
	}
	v.mu.Unlock()
	if done {
		_ = r.informer.RemoveEventHandler(r.handle)
	}
	return nil
}

func (v *view) WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool {
	return v.term.factory.WaitForCacheSync(stopCh)
}

func (v *view) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	return v.term.factory.WaitForCacheSyncWithContext(ctx)
}

func (v *view) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	g, err := v.term.factory.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	return genericInformer{informer: v.wrap(g.Informer()), lister: g.Lister()}, nil
}

func (v *view) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	return v.wrap(v.term.factory.InformerFor(obj, newFunc))
}

func (v *view) InformerName() *cache.InformerName { return v.term.factory.InformerName() }

func (v *view) wrap(i cache.SharedIndexInformer) cache.SharedIndexInformer {
	return &informer{SharedIndexInformer: i, view: v}
}

// The groups, bound to the view so that their informers come through InformerFor.
func (v *view) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Apps() apps.Interface { return apps.New(v, metav1.NamespaceAll, nil) }
func (v *view) Autoscaling() autoscaling.Interface {
	return autoscaling.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Batch() batch.Interface { return batch.New(v, metav1.NamespaceAll, nil) }
func (v *view) Certificates() certificates.Interface {
	return certificates.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Coordination() coordination.Interface {
	return coordination.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Core() core.Interface           { return core.New(v, metav1.NamespaceAll, nil) }
func (v *view) Discovery() discovery.Interface { return discovery.New(v, metav1.NamespaceAll, nil) }
func (v *view) Events() events.Interface       { return events.New(v, metav1.NamespaceAll, nil) }
func (v *view) Extensions() extensions.Interface {
	return extensions.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Flowcontrol() flowcontrol.Interface {
	return flowcontrol.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Lifecycle() lifecycle.Interface { return lifecycle.New(v, metav1.NamespaceAll, nil) }
func (v *view) Networking() networking.Interface {
	return networking.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Node() node.Interface         { return node.New(v, metav1.NamespaceAll, nil) }
func (v *view) Policy() policy.Interface     { return policy.New(v, metav1.NamespaceAll, nil) }
func (v *view) Rbac() rbac.Interface         { return rbac.New(v, metav1.NamespaceAll, nil) }
func (v *view) Resource() resource.Interface { return resource.New(v, metav1.NamespaceAll, nil) }
func (v *view) Scheduling() scheduling.Interface {
	return scheduling.New(v, metav1.NamespaceAll, nil)
}
func (v *view) Storage() storage.Interface { return storage.New(v, metav1.NamespaceAll, nil) }
func (v *view) Storagemigration() storagemigration.Interface {
	return storagemigration.New(v, metav1.NamespaceAll, nil)
}

// informer is a shared informer seen through a view: the handlers added to it are the
// view's, removed at its Shutdown.
type informer struct {
	cache.SharedIndexInformer
	view *view
}

func (i *informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.view.add(i.SharedIndexInformer, h, cache.HandlerOptions{})
}

func (i *informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.view.add(i.SharedIndexInformer, h, cache.HandlerOptions{ResyncPeriod: &resync})
}

func (i *informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.view.add(i.SharedIndexInformer, h, o)
}

// RemoveEventHandler removes a handler added through the view.
func (i *informer) RemoveEventHandler(h cache.ResourceEventHandlerRegistration) error {
	r, ok := h.(*registration)
	if !ok {
		return i.SharedIndexInformer.RemoveEventHandler(h)
	}
	v := i.view
	v.mu.Lock()
	v.pending = slices.DeleteFunc(v.pending, func(p *registration) bool { return p == r })
	v.regs = slices.DeleteFunc(v.regs, func(p *registration) bool { return p == r })
	v.mu.Unlock()
	select {
	case <-r.bound:
		return i.SharedIndexInformer.RemoveEventHandler(r.handle)
	default:
		return nil
	}
}

// AddIndexers adds the indexers the informer does not have yet: one of the same name was
// added by the same controller code in an earlier term, or by another controller using
// upstream's shared index (as kube-controller-manager's controllers check first).
func (i *informer) AddIndexers(indexers cache.Indexers) error {
	have := i.SharedIndexInformer.GetIndexer().GetIndexers()
	add := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := have[name]; !ok {
			add[name] = fn
		}
	}
	if len(add) == 0 {
		return nil
	}
	return i.SharedIndexInformer.AddIndexers(add)
}

// Run and RunWithContext start the hub's informers (a controller that runs an informer
// itself instead of starting the factory) and block until the caller's stop.
func (i *informer) Run(stopCh <-chan struct{}) {
	i.view.Start(stopCh)
	<-stopCh
}

func (i *informer) RunWithContext(ctx context.Context) {
	i.view.Start(ctx.Done())
	<-ctx.Done()
}

type genericInformer struct {
	informer cache.SharedIndexInformer
	lister   cache.GenericLister
}

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.informer }
func (g genericInformer) Lister() cache.GenericLister         { return g.lister }
