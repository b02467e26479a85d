package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/capabilities"

	"kubeos.dev/kube/internal/apiserver/aggregator"
	"kubeos.dev/kube/internal/apiserver/discovery"
	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/openapi"
	"kubeos.dev/kube/internal/apiserver/proxy"
	"kubeos.dev/kube/internal/apiserver/request"
	restapi "kubeos.dev/kube/internal/apiserver/rest"
	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

// Server is a prepared Kube server: etcd is up, the PKI and kubeconfig exist and the port
// is bound. Run serves.
type Server struct {
	opts Options
	// flowControl is API priority and fairness (flowcontrol.go), nil when disabled;
	// flowControlInformers feed it.
	flowControl          filters.FlowControl
	flowControlInformers informers.SharedInformerFactory
	member               *etcd.Member
	client               *clientv3.Client
	pki                  *pki.PKI
	listener             net.Listener
	metrics              *prometheus.Registry

	// overrideClients talk to the clusters of --etcd-servers-overrides.
	overrideClients []*clientv3.Client

	// Registry is the type registry the API serves.
	Registry *registry.Registry
	// Store is the object store.
	Store *storage.Store
	// URL is the server's https address.
	URL string
	// KubeconfigPath is the admin kubeconfig.
	KubeconfigPath string

	// apiserverConfig and apiserverClient are the server's own loopback identity
	// (system:apiserver in system:masters, as kube-apiserver's loopback client: exempt from
	// the in-flight limits), made once for bootstrap, admission, allocation and the
	// subresources that act through the API. Copy the config before changing it.
	apiserverConfig *rest.Config
	apiserverClient kubernetes.Interface

	ready     chan struct{}
	readyOnce sync.Once
	// auth is authentication and authorization (auth.go).
	auth *authState
	// aggregator is the API aggregation layer; it also resolves webhook Services.
	aggregator *aggregator.Aggregator
	// caches is the watch cache set of the running server (controllers stop the cache of a
	// deleted resource).
	caches *watchcache.Set
	// gcHints carries the REST handler's hints to the garbage collector (resources just
	// given an object with ownerReferences or a collector finalizer).
	gcHints chan schema.GroupResource
	// lifecycle is the lifecycle engine with the built-in kinds (lifecycle.go).
	lifecycle *lifecycleState
	// services is Service allocation and the kubernetes Service (services.go).
	services *servicesState
}

// New prepares a server from completed, validated options: it starts etcd (or connects to
// it), ensures the PKI, binds the port and writes the admin kubeconfig. On error everything
// started is stopped again.
func New(ctx context.Context, o Options) (_ *Server, err error) {
	s := &Server{opts: o, ready: make(chan struct{}), gcHints: make(chan schema.GroupResource, 1024)}
	// Upstream's code inside the server (strategies, admission plugins, controllers) logs
	// through klog: into the server's log, not the process's stderr.
	if o.Log != nil {
		klog.SetSlogLogger(o.Log)
	}
	// Pod validation reads whether privileged containers are allowed from upstream's
	// process-wide capabilities.
	capabilities.Setup(!o.DenyPrivileged, 0)
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if len(o.EtcdServers) == 0 {
		s.member, err = etcd.StartMember(ctx, etcd.MemberOptions{
			Name:          "kube",
			DataDir:       filepath.Join(o.DataDir, "etcd"),
			UnsafeNoFsync: o.EtcdUnsafeNoFsync,
			// No URLs: a member alone that no other process reaches (no TCP port; a unix
			// socket in the 0700 data directory; Kube itself talks to it in-process). No
			// peer can be slow, so elect at once and start fast, and keep no raft log in
			// memory for followers that cannot exist.
			HeartbeatInterval:      10 * time.Millisecond,
			ElectionTimeout:        100 * time.Millisecond,
			SnapshotCatchUpEntries: 100,
		})
		if err != nil {
			return nil, err
		}
		s.client = s.member.Client()
	} else {
		s.client, err = etcd.NewClient(etcd.ClientOptions{Endpoints: o.EtcdServers, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile, CAFile: o.EtcdCAFile})
	}
	if err != nil {
		return nil, err
	}
	hosts := servingHosts(o)
	if s.pki, err = pki.Ensure(pki.Options{Dir: o.PKIDir, Hosts: hosts}); err != nil {
		return nil, err
	}
	if s.listener, err = net.Listen("tcp", net.JoinHostPort(o.BindAddress, strconv.Itoa(o.SecurePort))); err != nil {
		return nil, fmt.Errorf("--secure-port: %w", err)
	}
	host := o.BindAddress
	if ip := net.ParseIP(host); ip.IsUnspecified() {
		host = "127.0.0.1"
		if o.AdvertiseAddress != "" {
			host = o.AdvertiseAddress
		}
	}
	port := s.listener.Addr().(*net.TCPAddr).Port
	s.URL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	s.KubeconfigPath = filepath.Join(o.DataDir, "kubeconfig")
	if err = pki.WriteKubeconfig(s.KubeconfigPath, s.URL, s.pki.CAPEM, s.pki.AdminCertPEM, s.pki.AdminKeyPEM, pki.AdminUser); err != nil {
		return nil, err
	}
	if s.Store, err = s.newStore(); err != nil {
		return nil, err
	}
	if err = s.etcdOverrides(ctx); err != nil {
		return nil, err
	}
	s.Registry = registry.New()
	for _, k := range registry.Builtins() {
		s.Registry.Add(k)
	}
	if s.apiserverConfig, err = s.LoopbackConfig("system:apiserver", "system:masters"); err != nil {
		return nil, err
	}
	if s.apiserverClient, err = kubernetes.NewForConfig(s.apiserverConfig); err != nil {
		return nil, err
	}
	s.wireWorkload()
	if err = s.newAuth(); err != nil {
		return nil, err
	}
	s.authorizeWorkload()
	// --- Services: cluster IP and node port allocation (services.go) ---
	if err = s.newServices(); err != nil {
		return nil, err
	}
	// --- end Services ---
	return s, nil
}

// Ready is closed once the server serves and its bootstrap objects exist.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// LoopbackConfig is a client configuration for in-process controllers: it authenticates as
// user with a client certificate issued by the server's CA.
func (s *Server) LoopbackConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := s.pki.IssueClientCert(user, groups, 0)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            s.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.pki.CAPEM, CertData: certPEM, KeyData: keyPEM},
		QPS:             -1,
		UserAgent:       user,
	}, nil
}

// Run serves until ctx ends, then stops everything in reverse start order.
func (s *Server) Run(ctx context.Context) error {
	defer s.close()
	o := s.opts
	cacheCtx, stopCaches := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCaches()
	packed := map[string]bool{
		// CRDs are large (their schemas), many and rarely read: packed, 5,000 of them take
		// ~8 MB instead of ~80 MB.
		storage.ResourcePrefix(apiextensionsv1.GroupName, "customresourcedefinitions"): true,
		// Pods are many (100,000 in a large cluster) and read mostly by node (the watch
		// cache's spec.nodeName index) or by writes of one: packed too, ~3 KB instead of ~17 KB.
		storage.ResourcePrefix("", "pods"): true,
		// Written often and read mostly as watch events: every node's Lease every 10 s,
		// Events (a scheduler writes one per binding), Nodes' status. The ring keeps 75 s
		// of events (up to --watch-cache-max-size), and kept decoded, 5,000 nodes' Lease
		// renewals alone held ~400 MB of maps that every GC cycle scanned; packed, the ring
		// shares the tree's bytes and live events are delivered as storage decoded them.
		storage.ResourcePrefix("coordination.k8s.io", "leases"): true,
		storage.ResourcePrefix("", "events"):                    true,
		storage.ResourcePrefix("", "nodes"):                     true,
	}
	caches := watchcache.NewSet(cacheCtx, watchcache.Options{Store: s.Store, EventBufferSize: o.WatchCacheSize, MaxEventBufferSize: o.WatchCacheMaxSize,
		PackPrefix: func(prefix string) bool { return packed[prefix] }})
	s.caches = caches

	s.metrics = prometheus.NewRegistry()
	s.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := filters.NewMetrics(s.metrics)

	// The aggregator also resolves the Services that webhooks name (admission and CRD
	// conversion), to a ready endpoint as its APIServices.
	agg, err := s.newAggregator()
	if err != nil {
		return err
	}
	s.aggregator = agg
	sec, err := s.newSecurity()
	if err != nil {
		return err
	}
	defer sec.close()
	if s.lifecycle, err = s.newLifecycle(s.auth.authorizer()); err != nil {
		return err
	}
	sec.admission.Mutating = s.lifecycle.mutators(sec.admission.Mutating)
	sec.admission.Validating = s.lifecycle.validators(sec.admission.Validating)
	watchesDone := make(chan struct{})
	// Connect subresources (pods/log, exec, attach, portforward, proxy; nodes/proxy;
	// services/proxy): internal/apiserver/proxy, toward node agents as
	// kube-apiserver-kubelet-client.
	kubeletTLS, err := proxy.KubeletClientTLS(s.pki)
	if err != nil {
		return err
	}
	if ca := o.KubeletCertificateAuthority; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("--kubelet-certificate-authority: %w", err)
		}
		kubeletTLS.RootCAs = x509.NewCertPool()
		if !kubeletTLS.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--kubelet-certificate-authority: no certificate in %s", ca)
		}
	} else {
		// As kube-apiserver without --kubelet-certificate-authority: a kubelet's serving
		// certificate is self-signed unless it bootstraps one from the kubelet-serving signer.
		kubeletTLS.InsecureSkipVerify = true
	}
	var addressTypes []corev1.NodeAddressType // nil: the proxy's default (InternalIP first)
	for _, t := range o.KubeletPreferredAddressTypes {
		addressTypes = append(addressTypes, corev1.NodeAddressType(t))
	}
	connect, err := proxy.New(proxy.Options{
		Objects:               proxy.StoreObjects{Store: s.Store},
		KubeletTLS:            kubeletTLS,
		PreferredAddressTypes: addressTypes,
		Authorize: func(ctx context.Context, u *request.User, info *request.Info) (bool, string) {
			return filters.Allowed(ctx, s.lifecycle.authz, u, info)
		},
	})
	if err != nil {
		return err
	}
	resources := restapi.New(restapi.Options{
		Connect:  connect,
		Registry: s.Registry, Store: s.Store, Caches: caches, Log: o.Log,
		OpenWatches: m.OpenWatches, Done: watchesDone,
		// The garbage collector (internal/controllers/garbagecollector) always runs.
		GarbageCollector: true,
		CollectorHint:    s.hintCollector,
		// Admission: webhooks and policies (security.go).
		Admission: s.auth.admission(sec.admission),
	})
	disc := discovery.New(s.Registry)
	disc.SetRemote(opsDiscovery{agg}) // the ops API (ops.go) is listed after the extension servers' groups
	oapi := openapi.New(s.Registry)
	oapi.SetRemote(agg) // the extension servers' documents, merged
	health := &health{client: s.client, overrides: s.Store.Clusters()[1:], ready: s.ready, bus: s.lifecycle.bus.Healthy}

	mux := http.NewServeMux()
	api := agg.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info, ok := request.InfoFrom(r.Context()); ok && info.IsResourceRequest {
			resources.ServeHTTP(w, r)
			return
		}
		disc.ServeHTTP(w, r)
	}))
	mux.Handle("/api", api)
	mux.Handle("/api/", api)
	mux.Handle("/apis", api)
	mux.Handle("/apis/", api)
	mux.Handle("/openapi/", oapi)
	mux.Handle("/version", http.HandlerFunc(serveVersion))
	mux.Handle("/version/", http.HandlerFunc(serveVersion))
	mux.Handle("/healthz", health.handler("healthz", false))
	mux.Handle("/healthz/", health.handler("healthz", false))
	mux.Handle("/livez", health.handler("livez", false))
	mux.Handle("/livez/", health.handler("livez", false))
	mux.Handle("/readyz", health.handler("readyz", true))
	mux.Handle("/readyz/", health.handler("readyz", true))
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}))
	// Operator tooling's read APIs (ops.go).
	s.opsHandlers(mux)
	// Profiling, as kube-apiserver's --profiling (on by default): authenticated users only.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		restapi.WriteStatus(w, notFound(r.URL.Path))
	}))
	s.newFlowControl()
	handler := filters.Chain(mux, filters.Options{
		MaxMutatingInFlight: inFlightLimit(o.MaxMutatingRequestsInFlight), MaxReadOnlyInFlight: inFlightLimit(o.MaxRequestsInFlight),
		FlowControl:    s.flowControl,
		Authenticators: s.auth.authenticators(s),
		Authorizer:     s.lifecycle.authz,
		Metrics:        m,
		Log:            o.Log,
		Audit:          sec.audit,
	})
	handler = s.withDashboard(handler) // the operator dashboard at /ui/ (dashboard.go)
	tlsConfig, err := s.pki.ServingTLSConfig()
	if err != nil {
		return err
	}
	clientAuthTLS(tlsConfig)
	srv, err := newHTTPServer(handler, tlsConfig) // serving.go
	if err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(tls.NewListener(s.listener, tlsConfig)) }()

	if err := s.bootstrap(ctx); err != nil {
		srv.Close()
		return err
	}
	var wg sync.WaitGroup
	ctrlCtx, stopControllers := context.WithCancel(ctx)
	defer stopControllers()
	for _, cluster := range s.Store.Clusters() { // the main one and --etcd-servers-overrides'
		compactor := &storage.Compactor{Store: cluster, Interval: o.CompactionInterval, Log: o.Log}
		wg.Add(1)
		go func() { defer wg.Done(); _ = compactor.Start(ctrlCtx) }()
	}
	if err := sec.start(ctrlCtx); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	if err := s.startAuth(ctrlCtx, &wg); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	if err := s.publishClientCA(ctrlCtx); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	if err := s.startLegacyTokenTracking(ctrlCtx, &wg); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	if err := s.startControllers(ctrlCtx, &wg); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	if err := s.startLifecycle(ctrlCtx, &wg); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	// --- Services: repair loops, default ServiceCIDR, kubernetes Service (services.go) ---
	if err := s.startServices(ctrlCtx, &wg); err != nil {
		stopControllers()
		wg.Wait()
		srv.Close()
		return err
	}
	// --- end Services ---
	// API aggregation: proxying to extension API servers and their availability.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := agg.Start(ctrlCtx); err != nil && ctrlCtx.Err() == nil {
			o.Log.Error("aggregator stopped", "err", err)
		}
	}()
	// The ops API's ClusterRole (ops.go).
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(ctrlCtx, time.Minute)
		defer cancel()
		if err := s.ensureOpsRole(ctx); err != nil && ctrlCtx.Err() == nil {
			o.Log.Error("ops API role", "err", err)
		}
	}()
	// The cluster DNS Service (clusterdns.go): created once admission serves Services.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.ensureClusterDNS(ctrlCtx); err != nil && ctrlCtx.Err() == nil {
			o.Log.Error("cluster DNS Service", "err", err)
		}
	}()
	s.readyOnce.Do(func() { close(s.ready) })
	fmt.Fprintf(o.Out, "Kube is ready at %s\n", s.URL)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		stopControllers()
		wg.Wait()
		return fmt.Errorf("serving HTTPS: %w", err)
	}
	// Stop in reverse: controllers, then HTTP (drain requests, end watches), caches, etcd.
	stopControllers()
	wg.Wait()
	close(watchesDone)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	stopCaches()
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
	}
	return nil
}

func (s *Server) close() {
	if s.listener != nil {
		s.listener.Close()
	}
	if s.client != nil {
		s.client.Close()
	}
	for _, c := range s.overrideClients {
		c.Close()
	}
	if s.member != nil {
		s.member.Close()
		s.member = nil
	}
}

// etcdOverrides keeps the resources of --etcd-servers-overrides in their clusters: one
// client per set of servers (the main client when they are --etcd-servers), each cluster
// answering a first read before the server starts.
func (s *Server) etcdOverrides(ctx context.Context) error {
	o := s.opts
	overrides, err := etcd.ParseServersOverrides(o.EtcdServersOverrides)
	if err != nil || len(overrides) == 0 {
		return err
	}
	type cluster struct {
		servers []string
		client  *clientv3.Client
	}
	clusters := []cluster{{o.EtcdServers, s.client}} // embedded: no servers match it
	var routes []storage.Override
	for _, ov := range overrides {
		i := slices.IndexFunc(clusters, func(c cluster) bool { return etcd.SameServers(c.servers, ov.Servers) })
		if i < 0 {
			c, err := etcd.NewClient(etcd.ClientOptions{Endpoints: ov.Servers, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile, CAFile: o.EtcdCAFile})
			if err != nil {
				return fmt.Errorf("--etcd-servers-overrides %s/%s: %w", ov.Group, ov.Resource, err)
			}
			s.overrideClients = append(s.overrideClients, c)
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err = c.Get(rctx, "/registry/health", clientv3.WithCountOnly())
			cancel()
			if err != nil {
				return fmt.Errorf("--etcd-servers-overrides %s/%s: etcd at %s does not answer: %w", ov.Group, ov.Resource, strings.Join(ov.Servers, ";"), err)
			}
			clusters = append(clusters, cluster{ov.Servers, c})
			i = len(clusters) - 1
		}
		routes = append(routes, storage.Override{Group: ov.Group, Resource: ov.Resource, Client: clusters[i].client})
		o.Log.Info("resource stored in its own etcd cluster", "group", ov.Group, "resource", ov.Resource, "servers", ov.Servers)
	}
	s.Store = s.Store.WithOverrides(routes...)
	return nil
}

// inFlightLimit is the capacity of an in-flight limit without priority and fairness: 0
// disables the limit, as upstream's --max-requests-inflight=0 (a channel of empty structs
// costs nothing per slot).
func inFlightLimit(n int) int {
	if n == 0 {
		return math.MaxInt32
	}
	return n
}

// serveVersion answers /version. kubectl parses gitVersion as strict semver.
func serveVersion(w http.ResponseWriter, r *http.Request) {
	data, _ := json.Marshal(versionInfo())
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

func trimSlash(p string) string { return strings.TrimSuffix(p, "/") }

// hintCollector passes a hint to the garbage collector without blocking: when the
// collector is behind (or not the leader here) hints are dropped and its idle probes find
// the resource instead.
func (s *Server) hintCollector(gr schema.GroupResource) {
	select {
	case s.gcHints <- gr:
	default:
	}
}
