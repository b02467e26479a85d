package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	kubeosclient "kubeos.dev/kube/pkg/client/clientset/versioned"
	kubeosinformers "kubeos.dev/kube/pkg/client/informers/externalversions"
)

// Options configure a Gateway.
type Options struct {
	// Kube and Kubeos read Services, EndpointSlices, TLS Secrets, Routes and Releases of the
	// whole cluster (the node's identity with the networking group).
	Kube   kubernetes.Interface
	Kubeos kubeosclient.Interface
	// HTTPAddr and HTTPSAddr are the listen addresses (":80", ":443"); empty: not served.
	HTTPAddr, HTTPSAddr string
	// Registerer receives the kube_gateway_* metrics (default: a registry of its own).
	Registerer prometheus.Registerer
	// Log is the gateway's logger.
	Log *slog.Logger
	// AccessLog, when set, gets one logfmt line per request (see accesslog.go), buffered:
	// written in chunks, at the latest 100 ms after a request and when Run ends (or on
	// Flush). Default: none.
	AccessLog io.Writer
	// BuildInterval is the least time between two table compilations: the first change
	// after a quiet spell is compiled at once, a burst of changes (EndpointSlice churn)
	// coalesces into one compilation per interval — longer when compiling takes longer
	// (at least twice the last compilation's time), so that compiling never takes more
	// than a third of a core. Default 100 ms.
	BuildInterval time.Duration
	// DialTimeout bounds a connection to an endpoint (default 5 s).
	DialTimeout time.Duration
	// Ready, when set, is called with the bound addresses once the first table is in
	// place (tests; nil address: not served).
	Ready func(http, https net.Addr)
}

// Gateway is the HTTP(S) reverse proxy of the Routes.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	access    *accessLog // nil: no access log
	table     atomic.Pointer[Table]
	swapped   atomic.Pointer[chan struct{}] // closed (and replaced) by each Swap
	awaiting  atomic.Int64                  // requests held by awaitEndpoints
	metrics   *metrics
	noRoute   *routeMetrics // the series of requests that match no Route
	transport *http.Transport
	upgrades  http.Handler // requests that switch protocols
}

// New makes a gateway; Run serves it. Without clients, only Swap fills its table (tests,
// benchmarks).
func New(o Options) (*Gateway, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.BuildInterval == 0 {
		o.BuildInterval = 100 * time.Millisecond
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	g := &Gateway{opts: o, log: o.Log, metrics: m, noRoute: m.route(RouteKey{})}
	if o.AccessLog != nil {
		g.access = newAccessLog(o.AccessLog)
	}
	// Keep-alive to every endpoint, with room for as many idle connections per endpoint as
	// requests to it are in flight at a busy moment (a connection closed for want of an
	// idle slot is a new TCP handshake for the next request). No transparent gzip: the
	// client's Accept-Encoding goes through as it is and the answer comes back untouched.
	g.transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        16384,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
		DisableCompression:  true,
	}
	g.upgrades = g.newUpgradeProxy()
	g.table.Store(Compile(Input{}))
	ch := make(chan struct{})
	g.swapped.Store(&ch)
	return g, nil
}

// Swap puts t in force for the requests that start from now on (those in flight finish
// with the table they started with). It binds each rule to its Route's metric series
// first.
func (g *Gateway) Swap(t *Table) {
	keep := map[RouteKey]*routeMetrics{}
	bind := func(es []*entry) {
		for _, e := range es {
			rm := keep[e.route]
			if rm == nil {
				rm = g.metrics.route(e.route)
				keep[e.route] = rm
			}
			e.rule.metrics.Store(rm)
		}
	}
	for _, es := range t.exact {
		bind(es)
	}
	for _, es := range t.wild {
		bind(es)
	}
	g.table.Store(t)
	ch := make(chan struct{})
	close(*g.swapped.Swap(&ch))
	g.metrics.builds.Inc()
	g.metrics.routes.Set(float64(len(keep)))
	g.metrics.forget(keep)
}

// Flush writes out the buffered access log lines (Run does every 100 ms and when it ends).
func (g *Gateway) Flush() {
	if g.access != nil {
		g.access.flush()
	}
}

// Table is the table in force.
func (g *Gateway) Table() *Table { return g.table.Load() }

// TLSConfig serves the certificate of the Route whose hostname the client names (SNI).
func (g *Gateway) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := g.table.Load().Certificate(hello.ServerName); c != nil {
				return c, nil
			}
			return nil, fmt.Errorf("gateway: no certificate for %q", hello.ServerName)
		}}
}

// Run watches the objects, keeps the table current and serves until ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	o := g.opts
	if o.Kube == nil || o.Kubeos == nil {
		return errors.New("gateway: Run needs the Kube and Kubeos clients")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lc net.ListenConfig
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var httpAddr, httpsAddr net.Addr
	if o.HTTPAddr != "" {
		l, err := lc.Listen(ctx, "tcp", o.HTTPAddr)
		if err != nil {
			return fmt.Errorf("gateway: --gateway-http-port: %w", err)
		}
		lns, httpAddr = append(lns, l), l.Addr()
	}
	if o.HTTPSAddr != "" {
		l, err := lc.Listen(ctx, "tcp", o.HTTPSAddr)
		if err != nil {
			return fmt.Errorf("gateway: --gateway-https-port: %w", err)
		}
		lns, httpsAddr = append(lns, tls.NewListener(l, g.TLSConfig())), l.Addr()
	}

	kf := informers.NewSharedInformerFactory(o.Kube, 0)
	sf := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
	}))
	xf := kubeosinformers.NewSharedInformerFactory(o.Kubeos, 0)
	svcs, eps := kf.Core().V1().Services(), kf.Discovery().V1().EndpointSlices()
	secrets := sf.Core().V1().Secrets()
	routes, releases := xf.Kubeos().V1alpha1().Routes(), xf.Kubeos().V1alpha1().Releases()
	changed := make(chan struct{}, 1)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal(changed) },
		UpdateFunc: func(any, any) { signal(changed) },
		DeleteFunc: func(any) { signal(changed) },
	}
	for _, inf := range []cache.SharedIndexInformer{svcs.Informer(), eps.Informer(), secrets.Informer(), routes.Informer(), releases.Informer()} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	kf.Start(ctx.Done())
	sf.Start(ctx.Done())
	xf.Start(ctx.Done())
	defer func() {
		cancel()
		kf.Shutdown()
		sf.Shutdown()
		xf.Shutdown()
	}()
	// Secrets and Releases are optional: a node without read rights on them still routes
	// (no TLS, no canary split) rather than waiting forever.
	if !cache.WaitForCacheSync(ctx.Done(), svcs.Informer().HasSynced, eps.Informer().HasSynced, routes.Informer().HasSynced) {
		return ctx.Err()
	}
	build := func() time.Duration {
		start := time.Now()
		in := Input{}
		rs, _ := routes.Lister().List(labels.Everything())
		in.Routes = rs
		ss, _ := svcs.Lister().List(labels.Everything())
		in.Services = ss
		es, _ := eps.Lister().List(labels.Everything())
		in.EndpointSlices = es
		rel, _ := releases.Lister().List(labels.Everything())
		in.Releases = rel
		sec, _ := secrets.Lister().List(labels.Everything())
		in.Secrets = sec
		t := Compile(in)
		for _, p := range t.Problems {
			g.log.Debug("route table", "problem", p)
		}
		g.Swap(t)
		return time.Since(start)
	}
	var builds builder
	builds.built(time.Now(), build())

	srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	var wg sync.WaitGroup
	errc := make(chan error, len(lns))
	for _, l := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("gateway: serve %s: %w", l.Addr(), err)
			}
		}()
	}
	lns = nil // the server closes them
	g.log.Info("gateway serving", "http", o.HTTPAddr, "https", o.HTTPSAddr)
	if o.Ready != nil {
		o.Ready(httpAddr, httpsAddr)
	}
	var err error
	later := time.NewTimer(time.Hour)
	later.Stop()
	flush := time.NewTicker(accessLogEvery)
	defer flush.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errc:
			break loop
		case <-changed:
			if builds.pending {
				continue // the timer compiles it with whatever else comes meanwhile
			}
			now := time.Now()
			if wait := builds.wait(now, o.BuildInterval); wait > 0 {
				builds.pending = true
				later.Reset(wait)
				continue
			}
			builds.built(now, build())
		case <-later.C:
			builds.pending = false
			builds.built(time.Now(), build())
		case <-flush.C:
			g.Flush()
		}
	}
	later.Stop()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	g.transport.CloseIdleConnections()
	g.Flush()
	return err
}

// builder paces the table's compilations (see Options.BuildInterval).
type builder struct {
	last    time.Time     // when the last compilation ended
	took    time.Duration // how long it took
	pending bool          // a compilation is scheduled
}

func (b *builder) built(start time.Time, took time.Duration) {
	b.last, b.took = start.Add(took), took
}

// wait is how long a change seen at now waits for its compilation: none when the last one
// ended at least the interval (or twice its own duration, if longer) ago, else the rest.
func (b *builder) wait(now time.Time, interval time.Duration) time.Duration {
	gap := max(interval, 2*b.took)
	if w := b.last.Add(gap).Sub(now); w > 0 {
		return w
	}
	return 0
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
