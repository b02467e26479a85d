package server

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/controllers/apiservice"
	"kubeos.dev/kube/internal/controllers/certificates"
	"kubeos.dev/kube/internal/controllers/garbagecollector"
	"kubeos.dev/kube/internal/controllers/leader"
	"kubeos.dev/kube/internal/controllers/namespace"
	"kubeos.dev/kube/internal/controllers/rootcacert"
	"kubeos.dev/kube/internal/controllers/serviceaccount"
	"kubeos.dev/kube/internal/controllers/sharedinformers"
	"kubeos.dev/kube/internal/rbac"
)

// ControllersGroup is the group of every built-in controller's identity
// (system:kube-controller:<name>); RBAC's bootstrap policy grants the controllers their
// rights through it.
const ControllersGroup = rbac.ControllersGroup

// ControllerUser is the identity of the built-in controller name.
func ControllerUser(name string) string { return "system:kube-controller:" + name }

// electedController is a built-in controller group that runs only on the server holding
// its Lease (kube-system/kube-<name>).
type electedController struct {
	name string
	new  func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error)
}

// starter is the one lifecycle of every controller: Start blocks until ctx ends. A nil
// starter from electedController.new means the controller is switched off on this server.
type starter interface {
	Start(ctx context.Context) error
}

// electedControllers are started in this order and stopped in reverse.
var electedControllers = []electedController{
	{name: "namespace-controller", new: func(_ *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return namespace.New(cfg, log)
	}},
	{name: garbagecollector.Name, new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return garbagecollector.New(cfg, garbagecollector.Options{Log: log, Hints: s.gcHints})
	}},
	// The default ServiceAccount of every namespace (upstream's serviceaccount-controller).
	{name: serviceaccount.Name, new: func(_ *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return serviceaccount.New(cfg, log)
	}},
	// Every namespace's kube-root-ca.crt ConfigMap (upstream's root-ca-cert-publisher).
	{name: rootcacert.Name, new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return rootcacert.New(cfg, s.pki.CAPEM, log)
	}},
	// --- CSR approving, signing by the Kube CA and cleaning (kube-controller-manager's
	// csrapproving, csrsigning, csrcleaner), internal/controllers/certificates ---
	agentNetworkingApprover, // approves agents' networking-identity CSRs before the signer sees them
	{name: certificates.Name, new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return certificates.New(cfg, certificates.Options{CAFile: s.pki.CAFile, CAKeyFile: s.pki.CAKeyFile, Duration: s.opts.ClusterSigningDuration, Log: log})
	}},
	// --- end certificates ---
	// The local APIServices of every served group-version (kube-aggregator's autoregister
	// and crdregistration), internal/controllers/apiservice.
	{name: apiservice.ControllerName, new: func(_ *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return apiservice.New(cfg, log)
	}},
	// The lifecycle engine with the built-in kubeos.dev kinds (lifecycle.go).
	{name: "lifecycle", new: func(s *Server, _ *rest.Config, log *slog.Logger) (starter, error) {
		return &lifecycleController{s: s, log: log}, nil
	}},
}

// SharedInformersUser is the identity the controllers' shared informers list and watch
// with (kube-controller-manager's "shared-informers" client).
const SharedInformersUser = "system:kube-controller:shared-informers"

// startElectedControllers runs each elected controller under leader election with its own
// identity. When ctx ends they are stopped one by one in reverse order; each releases its
// Lease once stopped, so another server takes over at once.
//
// The controllers that lead share one set of informers (sharedinformers.Hub, handed to
// them through their context), as kube-controller-manager's controllers share its
// ControllerContext.InformerFactory: pods are listed and watched once, not once per
// controller. Each controller writes with its own client and identity.
func (s *Server) startElectedControllers(ctx context.Context, wg *sync.WaitGroup) error {
	identity := s.leaderIdentity()
	hub, err := s.sharedInformers()
	if err != nil {
		return err
	}
	var cancels []context.CancelFunc
	var dones []chan struct{}
	for _, c := range slices.Concat(electedControllers, workloadControllers, clusterControllers, localPathControllers, schedulerControllers, simNodeControllers) {
		log := s.opts.Log.With("controller", c.name)
		cfg, err := s.LoopbackConfig(ControllerUser(c.name), ControllersGroup)
		if err != nil {
			return err
		}
		ctrl, err := c.new(s, cfg, log)
		if err != nil {
			return err
		}
		if ctrl == nil {
			continue // switched off: it takes no Lease, so an external one can take it
		}
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		cancels, dones = append(cancels, cancel), append(dones, done)
		go func() {
			defer close(done)
			err := leader.RunWithOptions(cctx, cfg, leader.Options{Name: "kube-" + c.name, Identity: identity, Log: log}, func(ctx context.Context) {
				if err := ctrl.Start(sharedinformers.NewContext(ctx, hub)); err != nil && ctx.Err() == nil {
					log.Error("controller stopped", "err", err)
				}
			})
			if err != nil {
				log.Error("leader election", "err", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		for i := len(cancels) - 1; i >= 0; i-- {
			cancels[i]()
			<-dones[i]
		}
	}()
	return nil
}

// sharedInformers makes the controllers' informer hub. Its client asks for protobuf, as
// kube-controller-manager's --kube-api-content-type default: informers of 100,000 pods
// decode it several times faster than JSON.
func (s *Server) sharedInformers() (*sharedinformers.Hub, error) {
	cfg, err := s.LoopbackConfig(SharedInformersUser, ControllersGroup)
	if err != nil {
		return nil, err
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "shared-informers")
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return sharedinformers.NewHub(cs), nil
}

// leaderIdentity names this server in Leases: host name and serving address. No two live
// servers share both (the address is bound for the server's lifetime), and a server that
// restarts on its address after a crash is the holder its Leases still name, so it leads
// again at once instead of waiting for them to expire (as a lone server would otherwise
// do after every kill -9).
func (s *Server) leaderIdentity() string {
	host, _ := os.Hostname()
	addr := s.URL
	if u, err := url.Parse(s.URL); err == nil {
		addr = u.Host
	}
	return host + "_" + addr
}
