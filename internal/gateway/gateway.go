package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
	// Log is the gateway's logger; AccessLog, when set, gets one line per request
	// (default: none).
	Log, AccessLog *slog.Logger
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
	access    *slog.Logger
	table     atomic.Pointer[Table]
	metrics   *metrics
	transport *http.Transport
	proxy     http.Handler
}

// New makes a gateway; Run serves it. Without clients, only Swap fills its table (tests,
// benchmarks).
func New(o Options) (*Gateway, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.AccessLog == nil {
		o.AccessLog = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	g := &Gateway{opts: o, log: o.Log, access: o.AccessLog, metrics: m}
	g.transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	g.proxy = g.newReverseProxy()
	g.table.Store(Compile(Input{}))
	return g, nil
}

// Swap puts t in force for the requests that start from now on (those in flight finish
// with the table they started with).
func (g *Gateway) Swap(t *Table) {
	g.table.Store(t)
	g.metrics.builds.Inc()
	keep := map[RouteKey]bool{}
	for _, es := range t.exact {
		for _, e := range es {
			keep[e.route] = true
		}
	}
	for _, es := range t.wild {
		for _, e := range es {
			keep[e.route] = true
		}
	}
	g.metrics.routes.Set(float64(len(keep)))
	g.metrics.forget(keep)
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
	build := func() {
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
	}
	build()

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
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errc:
			break loop
		case <-changed:
			build()
		}
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	g.transport.CloseIdleConnections()
	return err
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
