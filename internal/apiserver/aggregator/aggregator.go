package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	apiregistrationlisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"

	"kubeos.dev/kube/internal/apiserver/discovery"
	"kubeos.dev/kube/internal/apiserver/request"
)

// Options configure an Aggregator.
type Options struct {
	// Config is a loopback client configuration allowed to read APIServices, Services and
	// EndpointSlices and to write APIService status.
	Config *rest.Config
	// ProxyCertPEM and ProxyKeyPEM are the front-proxy client certificate.
	ProxyCertPEM, ProxyKeyPEM []byte
	// Log receives the aggregator's messages.
	Log *slog.Logger
}

// checkInterval is how often availability is checked without a change.
const checkInterval = 10 * time.Second

// remote is one service-backed APIService as this server knows it; a new one replaces it
// when anything changes.
type remote struct {
	svc       *apiregistrationv1.APIService
	transport *http.Transport
	// resources is the extension server's discovery of the group-version, from the last
	// check that passed (nil until one has).
	resources *metav1.APIResourceList
}

// Aggregator proxies remote group-versions and checks their availability.
type Aggregator struct {
	opts     Options
	client   kubernetes.Interface
	agg      aggregatorclient.Interface
	cert     tls.Certificate
	proxyLog *log.Logger
	services corelisters.ServiceLister
	slices   utilproxy.EndpointSliceGetter
	apisvcs  apiregistrationlisters.APIServiceLister

	mu      sync.RWMutex
	remotes map[schema.GroupVersion]*remote
	gen     atomic.Uint64
	kick    chan struct{}
	synced  atomic.Bool

	// docs are the remotes' OpenAPI documents (openapi.go), guarded by mu; openAPIGen
	// changes with them; openAPIKick asks the download loop for a pass; openAPIRetries,
	// the loop's own, say when failed downloads are tried again.
	docs           map[schema.GroupVersion]*openAPIDoc
	openAPIGen     atomic.Uint64
	openAPIKick    chan struct{}
	openAPIRetries map[schema.GroupVersion]openAPIRetry
}

// New makes an Aggregator; Start runs it.
func New(o Options) (*Aggregator, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cert, err := tls.X509KeyPair(o.ProxyCertPEM, o.ProxyKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("aggregator: front-proxy client certificate: %w", err)
	}
	cfg := rest.CopyConfig(o.Config)
	cfg.ContentType = "application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Aggregator{opts: o, client: cs, agg: agg, cert: cert, proxyLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelInfo), remotes: map[schema.GroupVersion]*remote{}, kick: make(chan struct{}, 1),
		docs: map[schema.GroupVersion]*openAPIDoc{}, openAPIKick: make(chan struct{}, 1), openAPIRetries: map[schema.GroupVersion]openAPIRetry{}}, nil
}

// Start runs the informers, the availability check and the OpenAPI downloads until ctx
// ends.
func (a *Aggregator) Start(ctx context.Context) error {
	kf := informers.NewSharedInformerFactory(a.client, 0)
	af := aggregatorinformers.NewSharedInformerFactory(a.agg, 0)
	svcInf := kf.Core().V1().Services()
	sliceInf := kf.Discovery().V1().EndpointSlices()
	apiInf := af.Apiregistration().V1().APIServices()
	getter, err := utilproxy.NewEndpointSliceIndexerGetter(sliceInf)
	if err != nil {
		return err
	}
	a.services, a.slices, a.apisvcs = svcInf.Lister(), getter, apiInf.Lister()
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.poke() },
		UpdateFunc: func(_, _ any) { a.poke() },
		DeleteFunc: func(any) { a.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf.Informer(), sliceInf.Informer(), apiInf.Informer()} {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return err
		}
	}
	kf.Start(ctx.Done())
	af.Start(ctx.Done())
	defer kf.Shutdown()
	defer af.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced, apiInf.Informer().HasSynced) {
		return nil
	}
	a.synced.Store(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); a.openAPILoop(ctx) }()
	t := time.NewTicker(checkInterval)
	defer t.Stop()
	for {
		a.check(ctx)
		a.pokeOpenAPI()
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
		case <-t.C:
		}
	}
}

func (a *Aggregator) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Generation changes whenever the remote group-versions or their resources change.
func (a *Aggregator) Generation() uint64 { return a.gen.Load() }

// Available lists the remote group-versions whose last check passed, in preference order
// (groupPriorityMinimum, then versionPriority, highest first), for discovery.
func (a *Aggregator) Available() []discovery.RemoteVersion {
	type entry struct {
		spec      apiregistrationv1.APIServiceSpec
		resources []metav1.APIResource
	}
	a.mu.RLock()
	var avail []entry
	for _, r := range a.remotes {
		if r.resources != nil {
			avail = append(avail, entry{r.svc.Spec, r.resources.APIResources})
		}
	}
	a.mu.RUnlock()
	slices.SortFunc(avail, func(x, y entry) int {
		if x.spec.GroupPriorityMinimum != y.spec.GroupPriorityMinimum {
			return int(y.spec.GroupPriorityMinimum - x.spec.GroupPriorityMinimum)
		}
		if x.spec.Group != y.spec.Group {
			return strings.Compare(x.spec.Group, y.spec.Group)
		}
		return int(y.spec.VersionPriority - x.spec.VersionPriority)
	})
	out := make([]discovery.RemoteVersion, len(avail))
	for i, e := range avail {
		out[i] = discovery.RemoteVersion{GroupVersion: schema.GroupVersion{Group: e.spec.Group, Version: e.spec.Version}, Resources: e.resources}
	}
	return out
}

// lookup returns the remote behind group-version gv, nil when gv is not remote.
func (a *Aggregator) lookup(gv schema.GroupVersion) *remote {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.remotes[gv]
}

// remotePath parses /apis/<group>/<version>[/...].
func remotePath(path string) (schema.GroupVersion, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return schema.GroupVersion{}, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: parts[0], Version: parts[1]}, true
}

// Handler proxies requests for remote group-versions and passes the rest to next.
func (a *Aggregator) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gv, ok := remotePath(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		rm := a.lookup(gv)
		if rm == nil {
			next.ServeHTTP(w, r)
			return
		}
		a.proxy(w, r, rm)
	})
}

// unavailable writes a 503 Status.
func unavailable(w http.ResponseWriter, msg string) {
	st := apierrors.NewServiceUnavailable(msg).ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(st)
}

func (a *Aggregator) proxy(w http.ResponseWriter, r *http.Request, rm *remote) {
	u, ok := request.UserFrom(r.Context())
	if !ok {
		unavailable(w, "no user on the request")
		return
	}
	target, err := a.resolve(rm.svc)
	if err != nil {
		unavailable(w, err.Error())
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.Host = target.Host
			setIdentity(pr.Out.Header, u.Name, u.UID, u.Groups, u.Extra)
		},
		Transport:     rm.transport,
		FlushInterval: -1,
		// A response cut off mid-body (an extension server stopped under a watch) is
		// logged through the server's log, not the process's standard logger.
		ErrorLog: a.proxyLog,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			a.opts.Log.Warn("aggregator: proxy", "apiservice", rm.svc.Name, "err", err)
			unavailable(w, fmt.Sprintf("error trying to reach service: %v", err))
		},
	}
	rp.ServeHTTP(w, r)
}

// setIdentity replaces the caller's credentials with the front-proxy identity headers.
func setIdentity(h http.Header, user, uid string, groups []string, extra map[string][]string) {
	for k := range h {
		lk := strings.ToLower(k)
		if lk == "authorization" || strings.HasPrefix(lk, "impersonate-") || strings.HasPrefix(lk, "x-remote-") {
			h.Del(k)
		}
	}
	h.Set("X-Remote-User", user)
	if uid != "" {
		h.Set("X-Remote-Uid", uid)
	}
	for _, g := range groups {
		h.Add("X-Remote-Group", g)
	}
	for k, vs := range extra {
		for _, v := range vs {
			h.Add("X-Remote-Extra-"+url.PathEscape(k), v)
		}
	}
}

// resolve picks the extension server's address: a ready endpoint of its Service.
func (a *Aggregator) resolve(s *apiregistrationv1.APIService) (*url.URL, error) {
	ref := s.Spec.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	return utilproxy.ResolveEndpoint(a.services, a.slices, ref.Namespace, ref.Name, port)
}

// errNotSynced: the Service and EndpointSlice informers have not synced yet.
var errNotSynced = errors.New("the service resolver has not synced yet")

// ResolveService returns the https URL of a ready endpoint of the Service's port (the
// Service port, as named by a webhook's clientConfig.service), the way APIServices are
// reached (kube-apiserver's endpoint routing): for admission and CRD conversion webhooks.
func (a *Aggregator) ResolveService(namespace, name string, port int32) (*url.URL, error) {
	if !a.synced.Load() {
		return nil, errNotSynced
	}
	return utilproxy.ResolveEndpoint(a.services, a.slices, namespace, name, port)
}

// transportFor is the TLS transport to an APIService's server.
func (a *Aggregator) transportFor(s *apiregistrationv1.APIService) (*http.Transport, error) {
	cfg := &tls.Config{Certificates: []tls.Certificate{a.cert}, MinVersion: tls.VersionTLS12,
		ServerName: s.Spec.Service.Name + "." + s.Spec.Service.Namespace + ".svc"}
	if s.Spec.InsecureSkipTLSVerify {
		cfg.InsecureSkipVerify = true
	} else {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.Spec.CABundle) {
			return nil, errors.New("spec.caBundle holds no certificate")
		}
		cfg.RootCAs = pool
	}
	return &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}, nil
}

// check refreshes the remotes from the APIServices and checks each one's availability.
func (a *Aggregator) check(ctx context.Context) {
	list, err := a.apisvcs.List(labels.Everything())
	if err != nil {
		return
	}
	seen := map[schema.GroupVersion]bool{}
	for _, s := range list {
		if s.Spec.Service == nil {
			continue
		}
		gv := schema.GroupVersion{Group: s.Spec.Group, Version: s.Spec.Version}
		seen[gv] = true
		rm := a.refresh(gv, s)
		cond, resources := a.probe(ctx, rm)
		a.setResources(gv, rm, resources)
		a.writeCondition(ctx, s, cond)
	}
	a.mu.Lock()
	for gv, rm := range a.remotes {
		if !seen[gv] {
			delete(a.remotes, gv)
			rm.transport.CloseIdleConnections()
			a.gen.Add(1)
		}
	}
	a.mu.Unlock()
}

// refresh returns the remote for s, with a new transport when its TLS settings changed.
func (a *Aggregator) refresh(gv schema.GroupVersion, s *apiregistrationv1.APIService) *remote {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.remotes[gv]
	if cur != nil && apiequality.Semantic.DeepEqual(cur.svc.Spec, s.Spec) {
		// Remotes are never changed in place (the proxy reads them without the lock).
		rm := &remote{svc: s, transport: cur.transport, resources: cur.resources}
		a.remotes[gv] = rm
		return rm
	}
	tr, err := a.transportFor(s)
	if err != nil {
		tr = &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
		a.opts.Log.Warn("aggregator: transport", "apiservice", s.Name, "err", err)
	}
	if cur != nil {
		cur.transport.CloseIdleConnections()
	}
	rm := &remote{svc: s, transport: tr}
	a.remotes[gv] = rm
	a.gen.Add(1)
	return rm
}

func (a *Aggregator) setResources(gv schema.GroupVersion, rm *remote, res *metav1.APIResourceList) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.remotes[gv] != rm || apiequality.Semantic.DeepEqual(rm.resources, res) {
		return
	}
	a.remotes[gv] = &remote{svc: rm.svc, transport: rm.transport, resources: res}
	a.gen.Add(1)
}

// probe is upstream's availability check of one remote APIService.
func (a *Aggregator) probe(ctx context.Context, rm *remote) (apiregistrationv1.APIServiceCondition, *metav1.APIResourceList) {
	s := rm.svc
	ref := s.Spec.Service
	cond := func(status apiregistrationv1.ConditionStatus, reason, msg string) apiregistrationv1.APIServiceCondition {
		return apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: status, Reason: reason, Message: msg}
	}
	if _, err := a.services.Services(ref.Namespace).Get(ref.Name); apierrors.IsNotFound(err) {
		return cond(apiregistrationv1.ConditionFalse, "ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace)), nil
	} else if err != nil {
		return cond(apiregistrationv1.ConditionUnknown, "ServiceAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)), nil
	}
	target, err := a.resolve(s)
	if err != nil {
		return cond(apiregistrationv1.ConditionFalse, "MissingEndpoints", fmt.Sprintf("endpoints for service/%s in %q have no addresses with port name %q: %v", ref.Name, ref.Namespace, portName(a, s), err)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	discoveryURL := *target
	discoveryURL.Path = "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, discoveryURL.String(), nil)
	req.Header.Set("Accept", "application/json")
	setIdentity(req.Header, "system:kube-aggregator", "", []string{"system:masters"}, nil)
	resp, err := (&http.Client{Transport: rm.transport}).Do(req)
	if err != nil {
		return cond(apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", fmt.Sprintf("failing or missing response from %s: %v", discoveryURL.String(), err)), nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return cond(apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", fmt.Sprintf("failing or missing response from %s: bad status from %s: %d", discoveryURL.String(), discoveryURL.String(), resp.StatusCode)), nil
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return cond(apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", fmt.Sprintf("%s: not an APIResourceList: %v", discoveryURL.String(), err)), nil
	}
	return cond(apiregistrationv1.ConditionTrue, "Passed", "all checks passed"), &list
}

func portName(a *Aggregator, s *apiregistrationv1.APIService) string {
	svc, err := a.services.Services(s.Spec.Service.Namespace).Get(s.Spec.Service.Name)
	if err != nil {
		return ""
	}
	port := int32(443)
	if s.Spec.Service.Port != nil {
		port = *s.Spec.Service.Port
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p.Name
		}
	}
	return ""
}

// writeCondition updates the APIService's Available condition when it changed.
func (a *Aggregator) writeCondition(ctx context.Context, s *apiregistrationv1.APIService, want apiregistrationv1.APIServiceCondition) {
	for _, c := range s.Status.Conditions {
		if c.Type == want.Type && c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return
		}
	}
	u := s.DeepCopy()
	want.LastTransitionTime = metav1.Now()
	replaced := false
	for i, c := range u.Status.Conditions {
		if c.Type == want.Type {
			if c.Status == want.Status {
				want.LastTransitionTime = c.LastTransitionTime
			}
			u.Status.Conditions[i], replaced = want, true
		}
	}
	if !replaced {
		u.Status.Conditions = append(u.Status.Conditions, want)
	}
	if _, err := a.agg.ApiregistrationV1().APIServices().UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		a.opts.Log.Warn("aggregator: APIService status", "apiservice", s.Name, "err", err)
	}
}
