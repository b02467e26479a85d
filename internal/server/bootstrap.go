package server

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/pkg/controlplane/controller/legacytokentracking"

	crdcontroller "kubeos.dev/kube/internal/controllers/crd"
	"kubeos.dev/kube/internal/controllers/leader"
	"kubeos.dev/kube/internal/crd"
	"kubeos.dev/kube/internal/pki"
)

// SystemNamespaces exist from the first start.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap creates the system namespaces and the two system priority classes
// (system-cluster-critical and system-node-critical, as kube-apiserver creates them at
// start) through the API, as any client would.
func (s *Server) bootstrap(ctx context.Context) error {
	cs := s.apiserverClient
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, ns := range SystemNamespaces {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if err := s.ensureCreated(ctx, "namespace", ns, func(ctx context.Context) error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	for _, pc := range schedulingapiv1.SystemPriorityClasses() {
		if err := s.ensureCreated(ctx, "priority class", pc.Name, func(ctx context.Context) error {
			_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// ensureCreated retries create until the object exists (created now or before) or ctx ends.
func (s *Server) ensureCreated(ctx context.Context, what, name string, create func(context.Context) error) error {
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := create(ctx)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		s.opts.Log.Warn("bootstrap: create "+what, "name", name, "err", err)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("bootstrap %s %s: %w", what, name, err)
	}
	return nil
}

// authConfigMap is kube-system/extension-apiserver-authentication: the CAs that sign client
// certificates, which components serving their own endpoints (kube-scheduler,
// kube-controller-manager, aggregated API servers) read to authenticate their callers, and
// the front proxy's request-header settings, as kube-apiserver publishes them.
const authConfigMap = "extension-apiserver-authentication"

// authTrustResync is how often this server's part of authConfigMap is checked without a
// change of the ConfigMap (kube-apiserver's minute).
const authTrustResync = time.Minute

// authTrust is what this server adds to authConfigMap: its client CA and, with a front
// proxy, its request-header CA and settings — a client certificate from the front-proxy CA
// with CN front-proxy-client, the user in X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra-* (kube-apiserver's defaults), which the aggregator's proxied requests
// carry.
func (s *Server) authTrust() map[string]string {
	own := map[string]string{pki.AuthClientCA: string(s.pki.CAPEM)}
	if s.pki.FrontProxy != nil {
		own[pki.AuthRequestHeaderClientCA] = string(s.pki.FrontProxy.CAPEM)
		own[pki.AuthRequestHeaderAllowedNames] = `["` + pki.FrontProxyClientName + `"]`
		own[pki.AuthRequestHeaderUsernameHeaders] = `["X-Remote-User"]`
		own[pki.AuthRequestHeaderUIDHeaders] = `["X-Remote-Uid"]`
		own[pki.AuthRequestHeaderGroupHeaders] = `["X-Remote-Group"]`
		own[pki.AuthRequestHeaderExtraHeadersPrefix] = `["X-Remote-Extra-"]`
	}
	return own
}

// publishClientCA adds this server's authentication trust to authConfigMap once admission
// is running (namespaced writes wait for its informers), then keeps it there until ctx
// ends, as kube-apiserver's ClusterAuthenticationTrust controller: whenever the ConfigMap
// changes or goes, and every minute. Each server merges its own CAs and request-header
// settings into what the ConfigMap holds (pki.MergeAuthenticationTrust) and never drops
// another server's, so API servers of one cluster with different CAs (different front-proxy
// CAs, say) are all trusted by the extension API servers.
func (s *Server) publishClientCA(ctx context.Context) error {
	own := s.authTrust()
	start, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(start, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := s.syncAuthTrust(ctx, own); err != nil {
			s.opts.Log.Warn("bootstrap: "+authConfigMap, "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("bootstrap %s: %w", authConfigMap, err)
	}
	// The goroutine ends with ctx (the controllers' context).
	go s.keepAuthTrust(ctx, own)
	return nil
}

// keepAuthTrust syncs authConfigMap whenever it changes or is deleted, and every
// authTrustResync, until ctx ends.
func (s *Server) keepAuthTrust(ctx context.Context, own map[string]string) {
	factory := informers.NewSharedInformerFactoryWithOptions(s.apiserverClient, 0, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", authConfigMap).String()
		}))
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke,
		UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
		s.opts.Log.Error("bootstrap: "+authConfigMap+" informer", "err", err)
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	t := time.NewTicker(authTrustResync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.syncAuthTrust(sctx, own)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.opts.Log.Warn("bootstrap: "+authConfigMap, "err", err)
			poke(nil) // again, after the ticker's or the next change's wait at the latest
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// syncAuthTrust merges own into authConfigMap: created when missing, updated with its
// resourceVersion when the merge changes it. A ConfigMap grown too large is deleted, as
// kube-apiserver does, so that every server adds its part back.
func (s *Server) syncAuthTrust(ctx context.Context, own map[string]string) error {
	cms := s.apiserverClient.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cur, err := cms.Get(ctx, authConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: authConfigMap, Namespace: metav1.NamespaceSystem}}, nil
	}
	if err != nil {
		return err
	}
	data, skipped := pki.MergeAuthenticationTrust(cur.Data, own, time.Now())
	if len(skipped) > 0 {
		s.opts.Log.Warn("bootstrap: "+authConfigMap+": values that do not parse are replaced", "keys", skipped)
	}
	if cur.ResourceVersion != "" && maps.Equal(cur.Data, data) {
		return nil
	}
	next := cur.DeepCopy()
	next.Data = data
	if cur.ResourceVersion == "" {
		_, err = cms.Create(ctx, next, metav1.CreateOptions{})
	} else {
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{})
	}
	if apierrors.IsRequestEntityTooLargeError(err) || (apierrors.IsInvalid(err) && strings.Contains(err.Error(), "Too long")) {
		if derr := cms.Delete(ctx, authConfigMap, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			return derr
		}
	}
	return err
}

// startLegacyTokenTracking runs upstream's legacy token tracking controller, which every
// kube-apiserver runs: kube-system/kube-apiserver-legacy-service-account-token-tracking says
// since when legacy service-account token use is tracked (kube-controller-manager's
// legacy token cleaner reads it).
func (s *Server) startLegacyTokenTracking(ctx context.Context, wg *sync.WaitGroup) error {
	cs := s.apiserverClient
	c := legacytokentracking.NewController(cs)
	wg.Add(1)
	go func() { defer wg.Done(); c.RunWithContext(ctx) }()
	return nil
}

// startControllers starts the built-in controllers; each stops when ctx ends and wg tracks them.
func (s *Server) startControllers(ctx context.Context, wg *sync.WaitGroup) error {
	// Namespace deletion and garbage collection run on the server holding their Lease.
	if err := s.startElectedControllers(ctx, wg); err != nil {
		return err
	}
	// API priority and fairness's bootstrap configuration (flowcontrol.go), on every server.
	if err := s.startFlowControlConfiguration(ctx, wg); err != nil {
		return err
	}
	// The in-process node agent (`kube server --agent`, agent.go) runs on every server.
	if err := s.startAgent(ctx, wg); err != nil {
		return err
	}
	// The embedded data servers (dataservices.go) run on every server.
	if err := s.startDataServices(ctx, wg); err != nil {
		return err
	}
	return s.startCRDController(ctx, wg)
}

// startCRDController starts the CRD controller: registration of CRD kinds in this server's
// registry, CRD status, deletion and storage-version migration.
func (s *Server) startCRDController(ctx context.Context, wg *sync.WaitGroup) error {
	cfg, err := s.LoopbackConfig("system:kube-controller:crd-controller", "system:kube-controllers")
	if err != nil {
		return err
	}
	// Every server registers the CRDs' kinds; the status work runs only on the holder of the
	// kube-system/kube-crd-controller Lease.
	var leading atomic.Bool
	log := s.opts.Log.With("controller", "crd")
	cc, err := crdcontroller.New(crdcontroller.Options{Config: cfg, Registry: s.Registry, Caches: s.caches, Log: log, Leading: leading.Load,
		Compile: crd.Options{ResolveService: s.aggregator.ResolveService}})
	if err != nil {
		return err
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := cc.Start(ctx); err != nil && ctx.Err() == nil {
			log.Error("crd controller stopped", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		err := leader.RunWithOptions(ctx, cfg, leader.Options{Name: "kube-crd-controller", Identity: s.leaderIdentity(), Log: log}, func(lctx context.Context) {
			leading.Store(true)
			cc.Resync()
			<-lctx.Done()
			leading.Store(false)
		})
		if err != nil && ctx.Err() == nil {
			log.Error("crd controller leader election", "err", err)
		}
	}()
	// Ready only once the existing CRDs are served.
	select {
	case <-cc.Registered():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the CRD controller did not register the existing CRDs within 30 s")
	}
	return nil
}
