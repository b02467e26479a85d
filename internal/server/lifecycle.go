package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/controllers/recorder"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/platform"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/eventbus"
	"kubeos.dev/kube/pkg/lifecycle"
)

// LifecycleOptions configure the lifecycle engine's event bus.
type LifecycleOptions struct {
	// EventBus is "memory" (default) or "redis".
	EventBus string
	// RedisAddr is host:port of the Redis server (--event-bus=redis).
	RedisAddr string
	// NoEngine installs the CRDs and enforces the platform kinds but runs none of the
	// engine's controllers (benchmarks that bring their own; external operators).
	NoEngine bool
	// DeletionTimeouts overrides, per platform kind ("Tenant", "Certificate", ...), how long
	// a deletion may take before the object is marked Stalled (default 10m).
	DeletionTimeouts map[string]time.Duration
	// DriftCheckPeriod is how often Active data objects (Database, Cache, Topic, Bucket) are
	// observed for drift (default platform.DataPeriod).
	DriftCheckPeriod time.Duration
	// AlertInterval is how often Alerts are evaluated (--alert-evaluation-interval; default
	// 15 s, Prometheus's usual evaluation_interval).
	AlertInterval time.Duration
}

func (o *LifecycleOptions) complete() {
	if o.EventBus == "" {
		o.EventBus = eventbus.BackendMemory
	}
}

func (o *LifecycleOptions) validate() error {
	switch o.EventBus {
	case "", eventbus.BackendMemory:
		if o.RedisAddr != "" {
			return fmt.Errorf("--redis-addr needs --event-bus=redis")
		}
	case eventbus.BackendRedis:
		if o.RedisAddr == "" {
			return fmt.Errorf("--event-bus=redis needs --redis-addr")
		}
	default:
		return fmt.Errorf("--event-bus %q: want memory or redis", o.EventBus)
	}
	if o.DriftCheckPeriod < 0 {
		return fmt.Errorf("drift check period %s is negative", o.DriftCheckPeriod)
	}
	if o.AlertInterval < 0 {
		return fmt.Errorf("--alert-evaluation-interval %s is negative", o.AlertInterval)
	}
	for kind, d := range o.DeletionTimeouts {
		if !slices.Contains(platform.Kinds, kind) {
			return fmt.Errorf("deletion timeout for %q: not a platform kind (want one of %s)", kind, strings.Join(platform.Kinds, ", "))
		}
		if d <= 0 {
			return fmt.Errorf("deletion timeout for %s: %s is not positive", kind, d)
		}
	}
	return nil
}

// lifecycleState is the engine with the built-in kinds, its bus, and the admission plugin
// and authorizer that enforce the platform kinds on every server.
type lifecycleState struct {
	bus       eventbus.Bus
	engine    *lifecycle.Engine
	admission *platform.Admission
	authz     *platform.Authorizer
	servers   *servers.Registry
	// cache is the drivers' informer cache (platform.Options.Cache), set once synced.
	cache  *platform.CacheReader
	events *platform.Events
	scheme *runtime.Scheme
	cfg    *rest.Config
	// term is the engine's leadership term (the Alert evaluator runs in it).
	term *leaderTerm
	// tracking is closed once the CRDs are served and the graph is tracked: the engine's
	// controllers wait for it.
	tracking chan struct{}
	// reader is the synced informer cache of the lifecycle kinds (set before tracking is
	// closed; the ops API's objects pages read it).
	reader client.Reader
}

var setControllerRuntimeLogger sync.Once

// newLifecycle builds the bus, the engine and the platform kinds (nothing runs yet).
func (s *Server) newLifecycle(inner platformAuthorizer) (*lifecycleState, error) {
	o := s.opts.LifecycleOptions
	o.complete()
	setControllerRuntimeLogger.Do(func() { ctrllog.SetLogger(logr.FromSlogHandler(s.opts.Log.Handler())) })
	bus, err := eventbus.New(eventbus.Options{Backend: o.EventBus, RedisAddr: o.RedisAddr, Registerer: s.metrics,
		Topics: []string{lifecycle.Topic},
		Types:  []string{lifecycle.EventPhaseChanged, lifecycle.EventIllegalTransition, lifecycle.EventDeletionStalled}})
	if err != nil {
		return nil, fmt.Errorf("--event-bus: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg, err := s.LoopbackConfig(ControllerUser("lifecycle"), ControllersGroup, "system:masters")
	if err != nil {
		return nil, err
	}
	cfg.Wrap(lifecycle.TraceTransport) // reconciles' requests carry their trace id into the audit log
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	engine, err := lifecycle.NewEngine(lifecycle.EngineOptions{Bus: bus, Registerer: s.metrics, Log: s.opts.Log.With("component", "lifecycle")})
	if err != nil {
		return nil, err
	}
	counter := storeCounter{s}
	kinds := map[string]platform.KindTuning{}
	for kind, d := range o.DeletionTimeouts {
		kinds[kind] = platform.KindTuning{DeletionTimeout: d}
	}
	if o.DriftCheckPeriod > 0 {
		for _, kind := range []string{"Database", "Cache", "Topic", "Bucket"} {
			t := kinds[kind]
			t.PeriodicRequeue = o.DriftCheckPeriod
			kinds[kind] = t
		}
	}
	if o.AlertInterval > 0 {
		t := kinds["Alert"]
		t.PeriodicRequeue = o.AlertInterval
		kinds["Alert"] = t
	}
	registry := servers.NewRegistry(direct) // the informer cache once synced (startLifecycle)
	reads := &platform.CacheReader{}        // likewise
	events := &platform.Events{}            // the controllers' recorder once they run
	term := newLeaderTerm()
	nodes, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	files := &platform.VolumeFiles{Reader: direct, Nodes: nodes.CoreV1().RESTClient()}
	if err := platform.Register(engine, platform.Options{Client: direct, CA: s.pki.CA, CAKey: s.pki.CAKey, Counter: counter, Kinds: kinds,
		Servers: registry, Cache: reads, Gatherer: s.metrics, Bus: bus, Log: s.opts.Log.With("component", "platform"), Events: events,
		Term: term.current, VolumeFiles: files}); err != nil {
		return nil, err
	}
	return &lifecycleState{bus: bus, engine: engine, scheme: scheme, cfg: cfg, servers: registry, cache: reads, events: events, term: term,
		admission: &platform.Admission{Engine: engine, Counter: counter},
		authz:     &platform.Authorizer{Inner: inner}, tracking: make(chan struct{})}, nil
}

type platformAuthorizer = interface {
	Authorize(ctx context.Context, u *request.User, info *request.Info) (bool, string)
}

// mutators puts the platform plugin first among the built-in mutating plugins.
func (lc *lifecycleState) mutators(rest []admission.Mutator) []admission.Mutator {
	return append([]admission.Mutator{lc.admission}, rest...)
}

// validators puts the platform plugin first among the built-in validating plugins.
func (lc *lifecycleState) validators(rest []admission.Validator) []admission.Validator {
	return append([]admission.Validator{lc.admission}, rest...)
}

// startLifecycle runs the bus, installs the kubeos.dev CRDs, and keeps the dependency
// graph and the enforcement caches current (on every server; the engine's controllers run
// under leader election, see electedControllers).
func (s *Server) startLifecycle(ctx context.Context, wg *sync.WaitGroup) error {
	lc := s.lifecycle
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := lc.bus.Start(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Error("event bus stopped", "err", err)
		}
	}()
	if err := installCRDs(ctx, lc.cfg, v1alpha1.CRDs(nil)); err != nil {
		return err
	}
	if err := installTenantRoles(ctx, lc.cfg, lc.scheme); err != nil {
		return err
	}
	// Secrets: only the server entries (kube-system, labelled with their server kind).
	hasKind, err := labels.NewRequirement(servers.LabelKind, selection.Exists, nil)
	if err != nil {
		return err
	}
	c, err := cache.New(lc.cfg, cache.Options{Scheme: lc.scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{servers.Namespace: {}}, Label: labels.NewSelector().Add(*hasKind)},
	}})
	if err != nil {
		return err
	}
	if err := lc.engine.Track(ctx, c); err != nil {
		return err
	}
	for _, obj := range []client.Object{&corev1.Namespace{}, &v1alpha1.Quota{}, &v1alpha1.AccessPolicy{}, &v1alpha1.SecretPolicy{},
		&corev1.Secret{}, &v1alpha1.Database{}, &v1alpha1.Backup{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return err
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.Start(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Error("lifecycle cache stopped", "err", err)
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !c.WaitForCacheSync(sctx) {
		return fmt.Errorf("lifecycle: informer caches did not sync")
	}
	lc.admission.SetReader(c)
	lc.authz.SetReader(c)
	lc.servers.SetReader(c)
	lc.reader = c
	lc.cache.Set(c)
	close(lc.tracking)
	return nil
}

// tenantResources are the namespaced kubeos.dev kinds a namespace's admins and editors
// manage (aggregated into the admin, edit and view ClusterRoles).
var tenantResources = []string{"databases", "caches", "topics", "buckets", "backups", "alerts", "credentials", "certificates",
	"volumes", "components", "routes", "releases", "applications"}

// installTenantRoles creates (or updates) the ClusterRoles that aggregate the namespaced
// kubeos.dev kinds into admin/edit (all verbs) and view (read).
func installTenantRoles(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	res := slices.Clone(tenantResources)
	for _, r := range tenantResources {
		res = append(res, r+"/status")
	}
	roles := []rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeos:data-edit", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: tenantResources,
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeos:data-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: res, Verbs: []string{"get", "list", "watch"}}}},
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range roles {
		if err := ensureClusterRole(ctx, c, roles[i], 100*time.Millisecond); err != nil {
			return fmt.Errorf("install ClusterRole %s: %w", roles[i].Name, err)
		}
	}
	return nil
}

// ensureClusterRole creates want or sets its labels and rules, retrying every interval until
// that succeeds or ctx ends.
func ensureClusterRole(ctx context.Context, c client.Client, want rbacv1.ClusterRole, interval time.Duration) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		var cur rbacv1.ClusterRole
		err := c.Get(ctx, client.ObjectKey{Name: want.Name}, &cur)
		switch {
		case apierrors.IsNotFound(err):
			w := want
			err = c.Create(ctx, &w)
		case err == nil:
			cur.Labels, cur.Rules = want.Labels, want.Rules
			err = c.Update(ctx, &cur)
		}
		return err == nil, nil
	})
}

// installCRDs creates or updates crds and waits until the API serves them.
func installCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
			case err == nil:
				cur.Spec = crd.Spec
				_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
			}
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	gv := v1alpha1.GroupVersion.String()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, nil
		}
		n := 0
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				n++
			}
		}
		return n >= len(crds), nil
	}); err != nil {
		return fmt.Errorf("CRDs of %s not served: %w", gv, err)
	}
	return nil
}

// lifecycleController runs the engine's controllers while this server holds the Lease: a
// fresh manager (informers, queues) per leadership term; Start returns after in-flight
// reconciles have drained.
type lifecycleController struct {
	s   *Server
	log *slog.Logger
}

func (c *lifecycleController) Start(ctx context.Context) error {
	lc := c.s.lifecycle
	lc.term.begin(ctx)
	if c.s.opts.NoEngine {
		<-ctx.Done()
		return nil
	}
	select {
	case <-lc.tracking:
	case <-ctx.Done():
		return nil
	}
	grace := 30 * time.Second
	mgr, err := manager.New(lc.cfg, manager.Options{
		Scheme: lc.scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		GracefulShutdownTimeout: &grace, Logger: logr.FromSlogHandler(c.log.Handler()),
	})
	if err != nil {
		return err
	}
	rec, err := recorder.Start(ctx, lc.cfg, "lifecycle")
	if err == nil {
		defer rec.Stop()
		lc.engine.SetEvents(rec)
		lc.events.Set(rec)
	}
	if err := lc.engine.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// leaderTerm holds the context of the engine's current leadership term (platform.Options.Term).
type leaderTerm struct {
	mu  sync.Mutex
	ctx context.Context
}

func newLeaderTerm() *leaderTerm {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // not leading until a term begins
	return &leaderTerm{ctx: ctx}
}

func (t *leaderTerm) begin(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctx = ctx
}

func (t *leaderTerm) current() context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctx
}

// storeCounter counts objects in the store by key prefix (a count-only etcd range).
type storeCounter struct{ s *Server }

func (sc storeCounter) Count(ctx context.Context, resource string, namespaces []string) (int64, error) {
	name, group, _ := strings.Cut(resource, ".")
	var total int64
	for _, ns := range namespaces {
		n, err := sc.s.Store.Count(ctx, storage.NamespacePrefix(group, name, ns))
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// EventBus is the bus the lifecycle engine publishes every transition and reconcile outcome
// on (topic lifecycle.Topic). In-process users and tests subscribe to it.
func (s *Server) EventBus() eventbus.Bus { return s.lifecycle.bus }
