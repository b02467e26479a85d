package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"kubeos.dev/kube/pkg/eventbus"
)

// Topic is the event-bus topic the engine publishes on.
const Topic = "lifecycle"

// Event types the engine publishes besides the per-kind outcomes (<kind>_<reason>).
const (
	EventPhaseChanged      = "phase_changed"
	EventIllegalTransition = "illegal_transition"
	EventDeletionStalled   = "deletion_stalled"
)

// EventRecorder records Kubernetes Events (events.k8s.io/v1 style, as client-go's
// tools/events.EventRecorder).
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// EngineOptions configure an Engine. Zero values take the defaults in complete.
type EngineOptions struct {
	// Bus receives every transition and reconcile outcome on Topic (nil: not published).
	Bus eventbus.Publisher
	// Registerer receives the kube_lifecycle_* metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Events records Kubernetes Events (a stalled deletion); nil records none.
	Events EventRecorder
	// Log is the engine's logger (default: discard).
	Log *slog.Logger
	// Now is the clock (default time.Now); Rand feeds retry jitter (default math/rand).
	Now  func() time.Time
	Rand func() float64
}

func (o *EngineOptions) complete() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
}

// Engine runs registered kinds through one reconcile pipeline. It keeps the dependency
// graph and the phase of every managed object current from informers (Track, or the
// controllers' own watches), and answers admission's question "would this close a cycle?"
// (CheckDependencies).
//
//	e, _ := lifecycle.NewEngine(lifecycle.EngineOptions{Bus: bus, Registerer: reg})
//	_ = lifecycle.Register(e, lifecycle.KindOptions[*v1alpha1.Credential]{Kind: "Credential", ...})
//	_ = e.SetupWithManager(mgr)
//	_ = mgr.Start(ctx) // drains in-flight reconciles before it returns
type Engine struct {
	opts  EngineOptions
	graph *Graph
	m     *metrics

	mu     sync.RWMutex
	phases map[Ref]Phase
	kinds  map[string]*kindEntry
	order  []*kindEntry

	tracked atomic.Bool
	events  atomic.Pointer[EventRecorder]
	sum     *summary // operator tooling's view (summary.go)
}

// kindEntry is a registered kind, type-erased.
type kindEntry struct {
	name    string
	newObj  func() client.Object
	links   func(client.Object) []Dep
	setup   func(mgr manager.Manager) error
	notify  chan event.GenericEvent
	running atomic.Bool
	// deletionTimeout is KindOptions.DeletionTimeout (summary.go).
	deletionTimeout time.Duration
}

// NewEngine returns an engine without kinds.
func NewEngine(opts EngineOptions) (*Engine, error) {
	opts.complete()
	m, err := newMetrics(opts.Registerer, opts.Now)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: metrics: %w", err)
	}
	return &Engine{opts: opts, graph: NewGraph(), m: m, phases: map[Ref]Phase{}, kinds: map[string]*kindEntry{}, sum: newSummary()}, nil
}

// SetEvents replaces the Kubernetes Event recorder (one per leadership term).
func (e *Engine) SetEvents(r EventRecorder) { e.events.Store(&r) }

func (e *Engine) recorder() EventRecorder {
	if p := e.events.Load(); p != nil {
		return *p
	}
	return e.opts.Events
}

// Graph is the engine's dependency graph (read it; the engine writes it).
func (e *Engine) Graph() *Graph { return e.graph }

// Register adds a kind. Call it before SetupWithManager and Track.
func Register[O Object](e *Engine, opts KindOptions[O]) error {
	opts.Complete(e.opts.Rand)
	if err := opts.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.kinds[opts.Kind]; dup {
		return fmt.Errorf("lifecycle: kind %s registered twice", opts.Kind)
	}
	k := &kindEntry{
		name:   opts.Kind,
		newObj: func() client.Object { return opts.New() },
		links:  func(o client.Object) []Dep { return opts.links(o.(O)) },
		notify: make(chan event.GenericEvent, 4096),

		deletionTimeout: opts.DeletionTimeout,
	}
	k.setup = func(mgr manager.Manager) error { return setupKind(e, k, mgr, opts) }
	e.kinds[opts.Kind] = k
	e.order = append(e.order, k)
	e.m.initKind(opts.Kind)
	return nil
}

// Kinds lists the registered kinds in registration order.
func (e *Engine) Kinds() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]string, len(e.order))
	for i, k := range e.order {
		out[i] = k.name
	}
	return out
}

// NewObject returns an empty object of a registered kind (nil if unknown).
func (e *Engine) NewObject(kind string) client.Object {
	if k := e.kind(kind); k != nil {
		return k.newObj()
	}
	return nil
}

func (e *Engine) kind(name string) *kindEntry {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.kinds[name]
}

// SetupWithManager adds one controller per registered kind to mgr. Unless Track runs, the
// controllers also keep the graph and phases current.
func (e *Engine) SetupWithManager(mgr manager.Manager) error {
	e.mu.RLock()
	kinds := append([]*kindEntry(nil), e.order...)
	e.mu.RUnlock()
	for _, k := range kinds {
		if err := k.setup(mgr); err != nil {
			return fmt.Errorf("lifecycle: kind %s: %w", k.name, err)
		}
	}
	return nil
}

// Track keeps the dependency graph and the phases current from c's informers, whether or
// not this process runs the controllers (admission needs the graph on every server). Call it
// before SetupWithManager; c must be started (or start later) by the caller.
func (e *Engine) Track(ctx context.Context, c cache.Cache) error {
	e.tracked.Store(true)
	e.mu.RLock()
	kinds := append([]*kindEntry(nil), e.order...)
	e.mu.RUnlock()
	for _, k := range kinds {
		inf, err := c.GetInformer(ctx, k.newObj())
		if err != nil {
			return fmt.Errorf("lifecycle: informer for %s: %w", k.name, err)
		}
		if _, err := inf.AddEventHandler(e.trackHandler(k.name)); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) trackHandler(kind string) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.observe(kind, o) },
		UpdateFunc: func(_, o any) { e.observe(kind, o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if obj, ok := o.(client.Object); ok {
				e.forget(Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()})
			}
		},
	}
}

// observe records an object seen by an informer: its dependencies and phase. A phase change
// wakes its dependents (they may be waiting for it to be Active).
func (e *Engine) observe(kind string, o any) {
	obj, ok := o.(Object)
	if !ok {
		return
	}
	k := e.kind(kind)
	if k == nil {
		return
	}
	ref := Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if err := e.graph.SetLinks(ref, k.links(obj)); err != nil {
		e.opts.Log.Warn("dependency graph: refused edges", "object", ref.String(), "err", err)
	}
	phase := obj.LifecycleStatus().Phase
	if phase == PhaseNone {
		phase = PhasePending
	}
	e.sum.observe(ref, obj, phase)
	if ts := obj.GetDeletionTimestamp(); ts != nil && containsFinalizer(obj) {
		e.m.finalizers.set(ref, ts.Time)
	}
	e.mu.Lock()
	old, seen := e.phases[ref]
	e.phases[ref] = phase
	e.mu.Unlock()
	if !seen {
		// What refers to it waited only for it to exist.
		var refs []Ref
		for _, d := range e.graph.DependentLinks(ref) {
			if d.Link == References {
				refs = append(refs, d.Ref)
			}
		}
		e.wake(refs)
	}
	if seen && old == phase {
		return
	}
	if seen {
		e.m.phase.WithLabelValues(kind, string(old)).Dec()
	}
	e.m.phase.WithLabelValues(kind, string(phase)).Inc()
	if seen {
		e.wake(e.graph.Dependents(ref))
	}
}

// forget drops a deleted object; what it depended on is woken (it may be waiting for its
// dependents to go).
func (e *Engine) forget(ref Ref) {
	e.mu.Lock()
	old, seen := e.phases[ref]
	delete(e.phases, ref)
	e.mu.Unlock()
	if seen {
		e.m.phase.WithLabelValues(ref.Kind, string(old)).Dec()
	}
	e.m.finalizers.clear(ref)
	e.sum.forget(ref)
	deps := refsOf(e.graph.Links(ref))
	_ = e.graph.SetDependencies(ref, nil)
	if len(e.graph.Dependents(ref)) == 0 {
		e.graph.Remove(ref)
	}
	for _, d := range deps {
		if !e.exists(d) && len(e.graph.Dependents(d)) == 0 {
			e.graph.Remove(d)
		}
	}
	e.wake(deps)
	e.wake(e.graph.Dependents(ref))
}

// wake enqueues refs in their kinds' controllers, if those run in this process.
func (e *Engine) wake(refs []Ref) {
	for _, r := range refs {
		k := e.kind(r.Kind)
		if k == nil || !k.running.Load() {
			continue
		}
		obj := k.newObj()
		obj.SetNamespace(r.Namespace)
		obj.SetName(r.Name)
		select {
		case k.notify <- event.GenericEvent{Object: obj}:
		default: // full: the periodic requeue catches up
		}
	}
}

// Phase returns the phase of ref as last seen by the informers, and whether it exists.
func (e *Engine) Phase(ref Ref) (Phase, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	p, ok := e.phases[ref]
	return p, ok
}

func (e *Engine) exists(ref Ref) bool { _, ok := e.Phase(ref); return ok }

// CheckDependencies is the admission-time question: would obj (of a registered kind)
// depending on what it names close a cycle? The error is a *CycleError with the path.
func (e *Engine) CheckDependencies(kind string, obj client.Object) error {
	k := e.kind(kind)
	if k == nil {
		return nil
	}
	ref := Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	return e.graph.Check(ref, refsOf(k.links(obj)))
}

// Dependencies returns what obj of a registered kind depends on, whatever the link.
func (e *Engine) Dependencies(kind string, obj client.Object) []Ref {
	return refsOf(e.Links(kind, obj))
}

// Links returns what obj of a registered kind depends on, each with its link.
func (e *Engine) Links(kind string, obj client.Object) []Dep {
	if k := e.kind(kind); k != nil {
		return k.links(obj)
	}
	return nil
}

// publish puts an event on the bus; a full or failing bus is logged, never fatal.
func (e *Engine) publish(ctx context.Context, ev eventbus.Event) {
	if e.opts.Bus == nil {
		return
	}
	if err := e.opts.Bus.Publish(ctx, Topic, ev); err != nil && !errors.Is(err, context.Canceled) {
		e.opts.Log.Debug("event bus publish", "type", ev.Type, "err", err)
	}
}

// EventType is the lower_snake_case event type of a kind's outcome: ("Credential",
// "Rotated") → credential_rotated.
func EventType(kind, reason string) string {
	return snake(kind) + "_" + snake(reason)
}

func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsUpper(r):
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) && !strings.HasSuffix(b.String(), "_") {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		default:
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
				b.WriteByte('_')
			}
		}
	}
	return strings.Trim(b.String(), "_")
}
