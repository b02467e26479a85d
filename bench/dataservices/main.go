// Command dataservices measures the Database kind at scale (bench/README.md, "Data services"):
// N Databases on one real PostgreSQL 15 created → all Active, once through the lifecycle
// engine (pkg/lifecycle with the platform's Database driver: finalizer, conditions, CAS status
// writes, graph, events on the memory bus, metrics) and once through a bare
// controller-runtime reconciler making the same provisioning calls (the same driver:
// CREATE ROLE, CREATE DATABASE … OWNER, REVOKE CONNECT, the connection Secret) and writing
// phase Active, in the same run against one in-process kube server with the built-in engine
// off (NoEngine). Both use the same worker count. Results are JSON lines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/dataservices/servers/testservers"
	"kubeos.dev/kube/internal/platform"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/eventbus"
	"kubeos.dev/kube/pkg/lifecycle"
)

func main() {
	n := flag.Int("n", 1000, "Databases per run")
	workers := flag.Int("workers", 8, "MaxConcurrentReconciles of both controllers")
	clients := flag.Int("clients", 8, "concurrent creating clients")
	rounds := flag.Int("rounds", 1, "engine/bare pairs (alternating order)")
	flag.Parse()
	if err := run(*n, *workers, *clients, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "dataservices bench:", err)
		os.Exit(1)
	}
}

func run(n, workers, clients, rounds int) (err error) {
	tm := &testservers.Main{}
	defer tm.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	pg := testservers.StartPostgres(tm)
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := servertest.StartWith(dir, io.Discard, func(o *server.Options) { o.NoEngine = true; o.EtcdUnsafeNoFsync = true })
	if err != nil {
		return err
	}
	defer srv.Stop()
	cfg, err := srv.Config()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := servers.Ensure(ctx, c, "pg-bench", servers.PostgreSQL, map[string][]byte{servers.KeyURL: []byte(pg.URL)}, true); err != nil {
		return err
	}
	for r := 0; r < rounds; r++ {
		modes := []string{"engine", "bare"}
		if r%2 == 1 {
			modes = []string{"bare", "engine"}
		}
		for _, mode := range modes {
			ns := fmt.Sprintf("bench-%s-%d", mode, r)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
				Labels: map[string]string{v1alpha1.LabelTenant: "bench"}}}); err != nil {
				return err
			}
			d, err := measure(cfg, scheme, c, mode, ns, n, workers, clients)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			out, _ := json.Marshal(map[string]any{"mode": mode, "round": r, "n": n, "workers": workers, "clients": clients,
				"seconds": d.Seconds(), "per_second": float64(n) / d.Seconds()})
			fmt.Println(string(out))
			// ~7.5 MB a database: drop this run's before the next (disk), untimed.
			if err := dropAll(ctx, pg.URL); err != nil {
				return err
			}
		}
	}
	return nil
}

// measure runs one controller over namespace ns and times n creates → all Active.
func measure(cfg *rest.Config, scheme *runtime.Scheme, c client.Client, mode, ns string, n, workers, clients int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := manager.New(cfg, manager.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}})
	if err != nil {
		return 0, err
	}
	driver := platform.NewDatabaseDriver(platform.Options{Client: c, Servers: servers.NewRegistry(c)})
	switch mode {
	case "engine":
		bus, err := eventbus.NewMemory(eventbus.Options{Registerer: prometheus.NewRegistry()})
		if err != nil {
			return 0, err
		}
		go bus.Start(ctx)
		e, err := lifecycle.NewEngine(lifecycle.EngineOptions{Bus: bus, Registerer: prometheus.NewRegistry()})
		if err != nil {
			return 0, err
		}
		if err := lifecycle.Register(e, lifecycle.KindOptions[*v1alpha1.Database]{Kind: "Database",
			New: func() *v1alpha1.Database { return &v1alpha1.Database{} }, Driver: driver,
			MaxConcurrentReconciles: workers, Filter: lifecycle.Filter{Namespaces: []string{ns}}}); err != nil {
			return 0, err
		}
		if err := e.SetupWithManager(mgr); err != nil {
			return 0, err
		}
	case "bare":
		skip := true
		if err := builder.ControllerManagedBy(mgr).Named("bare-database").
			For(&v1alpha1.Database{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			WithOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: &skip}).
			Complete(&bare{c: mgr.GetClient(), driver: driver}); err != nil {
			return 0, err
		}
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.Database{})
	if err != nil {
		return 0, err
	}
	var seen sync.Map
	var active atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	onObj := func(o any) {
		db, ok := o.(*v1alpha1.Database)
		if !ok || db.Status.Phase != lifecycle.PhaseActive {
			return
		}
		if _, loaded := seen.LoadOrStore(db.Name, true); !loaded && active.Add(1) == int64(n) {
			once.Do(func() { close(done) })
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onObj, UpdateFunc: func(_, o any) { onObj(o) }}); err != nil {
		return 0, err
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return 0, fmt.Errorf("cache did not sync")
	}
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, clients)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d%05d", i)}}
				if err := c.Create(ctx, db); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	select {
	case <-done:
	case <-time.After(30 * time.Minute):
		return 0, fmt.Errorf("only %d of %d Active after 30 minutes", active.Load(), n)
	}
	return time.Since(start), nil
}

// bare is what an operator writes by hand with controller-runtime: finalizer, the same
// driver calls, phase Active and a Ready condition in one status write.
type bare struct {
	c      client.Client
	driver lifecycle.Driver[*v1alpha1.Database]
}

func (b *bare) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var db v1alpha1.Database
	if err := b.c.Get(ctx, req.NamespacedName, &db); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if db.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(&db, lifecycle.Finalizer) {
		controllerutil.AddFinalizer(&db, lifecycle.Finalizer)
		if err := b.c.Update(ctx, &db); err != nil {
			return reconcile.Result{}, err
		}
	}
	seen, err := b.driver.Observe(ctx, &db)
	if err != nil {
		return reconcile.Result{}, err
	}
	if seen.Terminal != nil || seen.Phase == lifecycle.PhaseReconciling {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	var out lifecycle.Outcome
	switch lifecycle.Decide(seen, false) {
	case lifecycle.ActionProvision:
		out, err = b.driver.Provision(ctx, &db)
	case lifecycle.ActionUpdate:
		out, err = b.driver.Update(ctx, &db)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if out.Terminal != nil || out.Phase == lifecycle.PhaseReconciling {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if db.Status.Phase == lifecycle.PhaseActive {
		return reconcile.Result{}, nil
	}
	db.Status.Phase = lifecycle.PhaseActive
	meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Provisioned"})
	return reconcile.Result{}, b.c.Status().Update(ctx, &db)
}

// dropAll drops the benchmark's databases and roles (bench_*).
func dropAll(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range []string{`SELECT datname FROM pg_database WHERE datname LIKE 'bench\_%'`, `SELECT rolname FROM pg_roles WHERE rolname LIKE 'bench\_%'`} {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			stmt := "DROP DATABASE " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
			if strings.HasPrefix(q, "SELECT rolname") {
				stmt = "DROP ROLE " + pgx.Identifier{name}.Sanitize()
			}
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return err
			}
		}
	}
	return nil
}
