package server

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/pkg/controlplane/controller/legacytokentracking"

	crdcontroller "kubeos.dev/kube/internal/controllers/crd"
	"kubeos.dev/kube/internal/controllers/leader"
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

// publishClientCA writes kube-system/extension-apiserver-authentication once admission is
// running (namespaced writes wait for its informers).
func (s *Server) publishClientCA(ctx context.Context) error {
	cs := s.apiserverClient
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// kube-system/extension-apiserver-authentication: the CA that signs client
	// certificates, which components serving their own endpoints (kube-scheduler,
	// kube-controller-manager, aggregated API servers) read to authenticate their callers,
	// as kube-apiserver publishes it.
	// The requestheader keys are what the aggregator's proxied requests carry: a client
	// certificate from the front-proxy CA with CN front-proxy-client, and the user in
	// X-Remote-User, X-Remote-Group and X-Remote-Extra-* (as kube-apiserver's defaults).
	authCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: metav1.NamespaceSystem},
		Data: map[string]string{"client-ca-file": string(s.pki.CAPEM)}}
	if s.pki.FrontProxy != nil {
		authCM.Data["requestheader-client-ca-file"] = string(s.pki.FrontProxy.CAPEM)
		authCM.Data["requestheader-allowed-names"] = `["` + pki.FrontProxyClientName + `"]`
		authCM.Data["requestheader-username-headers"] = `["X-Remote-User"]`
		authCM.Data["requestheader-group-headers"] = `["X-Remote-Group"]`
		authCM.Data["requestheader-extra-headers-prefix"] = `["X-Remote-Extra-"]`
		authCM.Data["requestheader-uid-headers"] = `["X-Remote-Uid"]`
	}
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cur, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, authCM.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, authCM, metav1.CreateOptions{})
		case err == nil && !maps.Equal(cur.Data, authCM.Data):
			cur.Data = authCM.Data
			_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			s.opts.Log.Warn("bootstrap: extension-apiserver-authentication", "err", err)
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("bootstrap extension-apiserver-authentication: %w", err)
	}
	return nil
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
	cc, err := crdcontroller.New(crdcontroller.Options{Config: cfg, Registry: s.Registry, Caches: s.caches, Log: log, Leading: leading.Load})
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
