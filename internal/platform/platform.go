package platform

import (
	"context"
	"crypto"
	"crypto/x509"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/eventbus"
	"kubeos.dev/kube/pkg/lifecycle"
)

// Counter counts the stored objects of a resource ("configmaps", "deployments.apps") in
// namespaces.
type Counter interface {
	Count(ctx context.Context, resource string, namespaces []string) (int64, error)
}

// Options are what the drivers need.
type Options struct {
	// Client talks to the API directly (drivers read what they manage fresh).
	Client client.Client
	// CA and CAKey are the Kube CA that signs Certificates without an issuer.
	CA    *x509.Certificate
	CAKey crypto.Signer
	// Counter measures Quota usage.
	Counter Counter
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Kinds tunes the kinds (concurrency, retries); keyed by kind name, optional.
	Kinds map[string]KindTuning
	// Servers resolves the server entries the data kinds provision on.
	Servers *servers.Registry
	// Cache is the informer cache the Component, Application and Route drivers read what
	// they own and watch from (the server's lifecycle cache, set once it has synced); until
	// it is set, and when nil, they read through Client.
	Cache *CacheReader
	// Gatherer is the server's metrics registry (in-memory Alert evaluation).
	Gatherer prometheus.Gatherer
	// Bus is the event bus (Alert notifications).
	Bus eventbus.Bus
	// Log is the drivers' logger (default: discard).
	Log *slog.Logger
	// Events records drivers' Kubernetes Events (drift repaired); may be nil.
	Events *Events
	// Term is the context of the leadership term the engine's controllers run in (done
	// when this server stops leading). Work a driver starts beyond one reconcile — the
	// Alert evaluator — lives in it, so a server that lost the Lease stops at once rather
	// than overlapping the new leader. Nil: context.Background (tests, a single server).
	Term func() context.Context
	// VolumeFiles reaches Volumes' files through their nodes' agents (Backups of a Volume);
	// nil: a Backup of a Volume fails saying so.
	VolumeFiles *VolumeFiles
}

// cached is the reader of what the drivers read from the informer cache: Cache once set,
// else Client.
func (o Options) cached() client.Reader { return o.Cache.Reader(o.Client) }

// KindTuning overrides a kind's pipeline settings.
type KindTuning struct {
	MaxConcurrentReconciles int
	DeletionTimeout         time.Duration
	// PeriodicRequeue overrides a kind's periodic observe (the data kinds' drift check).
	PeriodicRequeue time.Duration
}

// Kinds are the platform kinds in dependency order.
var Kinds = []string{"Tenant", "Quota", "AccessPolicy", "SecretPolicy", "Credential", "Certificate",
	"Database", "Cache", "Topic", "Bucket", "Backup", "Alert", "Volume", "Component", "Route", "Release", "Application"}

// ClusterScoped are the cluster-scoped kinds (a Ref to one has no namespace).
var ClusterScoped = []string{"Tenant", "Quota", "AccessPolicy"}

// Register adds the platform kinds to e.
func Register(e *lifecycle.Engine, o Options) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Servers == nil {
		o.Servers = servers.NewRegistry(o.Client)
	}
	if o.Cache == nil {
		o.Cache = &CacheReader{}
	}
	tune := func(kind string, conc int) (int, time.Duration) {
		t := o.Kinds[kind]
		if t.MaxConcurrentReconciles == 0 {
			t.MaxConcurrentReconciles = conc
		}
		return t.MaxConcurrentReconciles, t.DeletionTimeout
	}
	var err error
	add := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	add(func() error {
		c, dt := tune("Tenant", 4)
		return registerKind(e, lifecycle.KindOptions[*v1alpha1.Tenant]{Kind: "Tenant", New: func() *v1alpha1.Tenant { return &v1alpha1.Tenant{} },
			Driver: &tenantDriver{c: o.Client}, MaxConcurrentReconciles: c, DeletionTimeout: dt})
	})
	add(func() error {
		c, dt := tune("Quota", 2)
		return registerKind(e, lifecycle.KindOptions[*v1alpha1.Quota]{Kind: "Quota", New: func() *v1alpha1.Quota { return &v1alpha1.Quota{} },
			Driver: &quotaDriver{c: o.Client, counter: o.Counter}, MaxConcurrentReconciles: c, DeletionTimeout: dt,
			Dependencies: func(q *v1alpha1.Quota) []lifecycle.Ref { return []lifecycle.Ref{{Kind: "Tenant", Name: q.Spec.Tenant}} }})
	})
	add(func() error {
		c, dt := tune("AccessPolicy", 2)
		return registerKind(e, lifecycle.KindOptions[*v1alpha1.AccessPolicy]{Kind: "AccessPolicy", New: func() *v1alpha1.AccessPolicy { return &v1alpha1.AccessPolicy{} },
			Driver: nopDriver[*v1alpha1.AccessPolicy]{}, MaxConcurrentReconciles: c, DeletionTimeout: dt,
			Dependencies: func(p *v1alpha1.AccessPolicy) []lifecycle.Ref {
				return []lifecycle.Ref{{Kind: "Tenant", Name: p.Spec.Tenant}}
			}})
	})
	add(func() error {
		c, dt := tune("SecretPolicy", 2)
		return registerKind(e, lifecycle.KindOptions[*v1alpha1.SecretPolicy]{Kind: "SecretPolicy", New: func() *v1alpha1.SecretPolicy { return &v1alpha1.SecretPolicy{} },
			Driver: nopDriver[*v1alpha1.SecretPolicy]{}, MaxConcurrentReconciles: c, DeletionTimeout: dt})
	})
	add(func() error {
		c, dt := tune("Credential", 8)
		return registerKind(e, lifecycle.KindOptions[*v1alpha1.Credential]{Kind: "Credential", New: func() *v1alpha1.Credential { return &v1alpha1.Credential{} },
			Driver: &CredentialDriver{Client: o.Client, Now: o.Now}, MaxConcurrentReconciles: c, DeletionTimeout: dt})
	})
	add(func() error {
		c, dt := tune("Certificate", 4)
		return registerKind(e, lifecycle.KindOptions[*v1alpha1.Certificate]{Kind: "Certificate", New: func() *v1alpha1.Certificate { return &v1alpha1.Certificate{} },
			Driver: &certificateDriver{c: o.Client, ca: o.CA, caKey: o.CAKey, now: o.Now}, MaxConcurrentReconciles: c, DeletionTimeout: dt,
			Dependencies: func(c *v1alpha1.Certificate) []lifecycle.Ref {
				if c.Spec.Issuer == "" {
					return nil
				}
				return []lifecycle.Ref{{Kind: "Certificate", Namespace: c.Namespace, Name: c.Spec.Issuer}}
			}})
	})
	for _, f := range []func(*lifecycle.Engine, Options) error{registerDatabase, registerCache, registerTopic, registerBucket, registerBackup, registerAlert,
		registerVolume, registerComponent, registerRoute, registerRelease, registerApplication} {
		add(func() error { return f(e, o) })
	}
	return err
}

// registerKind registers a kind whose Dependencies (its implicit references) are extended
// by its spec.dependsOn.
func registerKind[O v1alpha1.Dependent](e *lifecycle.Engine, ko lifecycle.KindOptions[O]) error {
	implicit := ko.Dependencies
	ko.Dependencies = func(obj O) []lifecycle.Ref {
		var out []lifecycle.Ref
		if implicit != nil {
			out = implicit(obj)
		}
		return append(out, DependsOnRefs(obj.GetNamespace(), obj.GetDependsOn())...)
	}
	return lifecycle.Register(e, ko)
}

// RegisterData registers a data kind with the tuning of o.Kinds[ko.Kind] over the defaults
// in ko (concurrency, deletion timeout, periodic observe) and dependsOn added to its
// Dependencies. The data kinds' register funcs use it.
func RegisterData[O v1alpha1.Dependent](e *lifecycle.Engine, o Options, ko lifecycle.KindOptions[O]) error {
	t := o.Kinds[ko.Kind]
	if t.MaxConcurrentReconciles != 0 {
		ko.MaxConcurrentReconciles = t.MaxConcurrentReconciles
	}
	if t.DeletionTimeout != 0 {
		ko.DeletionTimeout = t.DeletionTimeout
	}
	if t.PeriodicRequeue != 0 {
		ko.PeriodicRequeue = t.PeriodicRequeue
	}
	return registerKind(e, ko)
}

// DependsOnRefs turns spec.dependsOn of an object in namespace into engine Refs: a
// namespaced kind's empty namespace is the object's own; a cluster-scoped kind has none.
func DependsOnRefs(namespace string, deps []v1alpha1.DependencyRef) []lifecycle.Ref {
	out := make([]lifecycle.Ref, 0, len(deps))
	for _, d := range deps {
		r := lifecycle.Ref{Kind: d.Kind, Name: d.Name, Namespace: d.Namespace}
		switch {
		case slices.Contains(ClusterScoped, d.Kind):
			r.Namespace = ""
		case r.Namespace == "":
			r.Namespace = namespace
		}
		out = append(out, r)
	}
	return out
}

// nopDriver is the driver of kinds whose effect is enforcement elsewhere (admission, the
// authorizer): there is nothing to provision.
type nopDriver[O lifecycle.Object] struct{}

func (nopDriver[O]) Observe(context.Context, O) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "Enforced"}, nil
}
func (nopDriver[O]) Provision(context.Context, O) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}
func (nopDriver[O]) Update(context.Context, O) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}
func (nopDriver[O]) Deprovision(context.Context, O) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}

func ownerRef(obj client.Object, kind string) []metav1OwnerReference {
	t := true
	return []metav1OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: &t}}
}
