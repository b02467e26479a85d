package lifecycle

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Driver does the kind-specific work; the engine does everything else (queueing, retries,
// conditions, phase, finalizer, events). Objects passed in are copies the driver may modify
// (the engine writes spec/metadata changes and status separately, never in one pass).
//
// The engine calls Observe first, then, by what it found: Provision when the managed
// resources do not exist, Update when they exist but differ from the spec, nothing when they
// are up to date; Deprovision once the object is being deleted.
type Driver[O client.Object] interface {
	Observe(ctx context.Context, obj O) (Outcome, error)
	Provision(ctx context.Context, obj O) (Outcome, error)
	Update(ctx context.Context, obj O) (Outcome, error)
	Deprovision(ctx context.Context, obj O) (Outcome, error)
}

// Outcome is a driver's answer. A returned error is transient and retried through the kind's
// retry policy; a permanent problem goes in Terminal instead (or wrap with
// reconcile.TerminalError).
type Outcome struct {
	// Exists and UpToDate are Observe's findings.
	Exists, UpToDate bool
	// Requeue asks for another reconcile soon (through the rate limiter); RequeueAfter at a
	// given time (a Credential's next rotation). Neither means the work is unfinished.
	Requeue      bool
	RequeueAfter time.Duration
	// Phase is a hint: PhaseReconciling means the work is under way (waiting for something
	// external), PhaseFailed that it cannot succeed; empty means done.
	Phase Phase
	// Reason (CamelCase) and Message go into the conditions and the event.
	Reason  string
	Message string
	// Terminal is a permanent error: the object becomes Stalled (phase Failed) and is not
	// retried until its spec changes.
	Terminal error
}

// Action is what the engine does after Observe.
type Action string

// The actions Decide returns.
const (
	ActionNone        Action = "None"
	ActionProvision   Action = "Provision"
	ActionUpdate      Action = "Update"
	ActionDeprovision Action = "Deprovision"
)

// Decide picks the driver call after Observe.
func Decide(observed Outcome, deleting bool) Action {
	switch {
	case deleting:
		return ActionDeprovision
	case !observed.Exists:
		return ActionProvision
	case !observed.UpToDate:
		return ActionUpdate
	default:
		return ActionNone
	}
}

// Finalizer is the finalizer the engine keeps on managed objects until Deprovision succeeds.
const Finalizer = "kubeos.dev/lifecycle"

// KindOptions register a kind with the engine.
type KindOptions[O client.Object] struct {
	// Kind names the kind in metrics, events and Refs ("Tenant").
	Kind string
	// New returns an empty object of the kind.
	New func() O
	// Driver does the kind's work; required.
	Driver Driver[O]
	// Transitions narrows the phase transitions (default DefaultTransitions()).
	Transitions TransitionTable
	// Dependencies lists what an object depends on (nil: nothing): it is reconciled only
	// while they are Active, and each is torn down after it (link Requires).
	Dependencies func(O) []Ref
	// References lists what an object depends on for ordering only (link References): it
	// is held only while one does not exist (DependenciesReady=False naming it), never by
	// its phase; each is torn down after it. The tooling draws the object under each (a
	// Release under its Component). Nil: none.
	References func(O) []Ref
	// Members lists the objects an aggregate is made of (link Contains): it is reconciled
	// only while they are Active; its deletion waits, after its Deprovision (which deletes
	// them), until they are gone, and theirs does not wait for it (an Application and its
	// Components). Nil: none.
	Members func(O) []Ref
	// Retry decides retries per error class (default DefaultPolicy).
	Retry *Policy[reconcile.Request]
	// Thrash defers objects reconciled too often (default: more than 20 times in 1 minute →
	// deferred by 1 minute).
	Thrash *ThrashGuard[reconcile.Request]
	// MaxConcurrentReconciles is the worker pool size (default 1).
	MaxConcurrentReconciles int
	// PeriodicRequeue reconciles every Active object this often (0: only on change).
	PeriodicRequeue time.Duration
	// ReconcileTimeout bounds one reconcile (default 1 minute).
	ReconcileTimeout time.Duration
	// DeletionTimeout is how long Deprovision may keep failing before the object is marked
	// Stalled with an event and a metric (default 10 minutes). It is still retried.
	DeletionTimeout time.Duration
	// Filter selects the objects and the changes that start a reconcile (default: all).
	Filter Filter
	// Owns are types of objects the kind's objects control (a controller ownerReference): a
	// change of one reconciles its owner (a Component's Deployment becoming ready).
	Owns []client.Object
	// Watches map changes of other objects to the objects of this kind to reconcile.
	Watches []Watch
}

// Watch maps changes of objects of one type to objects of a kind to reconcile.
type Watch struct {
	// Object is an empty object of the watched type.
	Object client.Object
	// Map returns the objects (namespace, name) of the kind that obj concerns.
	Map func(ctx context.Context, obj client.Object) []types.NamespacedName
	// Delay, when set, reconciles the mapped objects this long after the event instead of at
	// once, so that the events of one spell (an Application's Components becoming ready one
	// after another) make one pass, not one each.
	Delay time.Duration
}

// Complete fills in the defaults. rand feeds the retry jitter (nil: no jitter).
func (o *KindOptions[O]) Complete(rand func() float64) {
	if o.Transitions == nil {
		o.Transitions = DefaultTransitions()
	}
	none := func(O) []Ref { return nil }
	if o.Dependencies == nil {
		o.Dependencies = none
	}
	if o.References == nil {
		o.References = none
	}
	if o.Members == nil {
		o.Members = none
	}
	if o.Retry == nil {
		o.Retry = DefaultPolicy[reconcile.Request](rand)
	}
	if o.Thrash == nil {
		o.Thrash = &ThrashGuard[reconcile.Request]{Max: 20, Window: time.Minute, Defer: time.Minute}
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 1
	}
	if o.ReconcileTimeout == 0 {
		o.ReconcileTimeout = time.Minute
	}
	if o.DeletionTimeout == 0 {
		o.DeletionTimeout = 10 * time.Minute
	}
}

// Validate names the first bad option.
func (o *KindOptions[O]) Validate() error {
	switch {
	case o.Kind == "":
		return fmt.Errorf("lifecycle: kind options need a Kind")
	case o.New == nil:
		return fmt.Errorf("lifecycle: kind %s: New is required", o.Kind)
	case o.Driver == nil:
		return fmt.Errorf("lifecycle: kind %s: Driver is required", o.Kind)
	case o.MaxConcurrentReconciles < 0 || o.PeriodicRequeue < 0 || o.ReconcileTimeout < 0 || o.DeletionTimeout < 0:
		return fmt.Errorf("lifecycle: kind %s: MaxConcurrentReconciles and durations must not be negative", o.Kind)
	}
	if err := o.Transitions.Validate(); err != nil {
		return fmt.Errorf("lifecycle: kind %s: %w", o.Kind, err)
	}
	return nil
}

// links is everything an object depends on, each with its link.
func (o *KindOptions[O]) links(obj O) []Dep {
	return mergeDeps(o.Dependencies(obj), o.References(obj), o.Members(obj))
}

func nsName(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
