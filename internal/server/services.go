package server

import (
	"context"
	"net"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/controllers/kubernetesservice"
	"kubeos.dev/kube/internal/servicealloc"
)

// servicesState is Service allocation (internal/servicealloc) and the default/kubernetes
// Service (internal/controllers/kubernetesservice).
type servicesState struct {
	alloc  *servicealloc.Allocator
	ranges servicealloc.Ranges
}

// The kinds Service allocation needs served.
var serviceAllocKinds = []schema.GroupVersionResource{
	{Version: "v1", Resource: "services"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "ipaddresses"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"},
}

// newServices builds the Service allocator and makes it the Service kind's Allocator. It
// does nothing while the registry does not serve Services, IPAddresses and ServiceCIDRs.
func (s *Server) newServices() error {
	for _, gvr := range serviceAllocKinds {
		if _, ok := s.Registry.Lookup(gvr); !ok {
			return nil
		}
	}
	ranges, err := servicealloc.ParseRanges(s.opts.ServiceClusterIPRange, s.opts.ServiceNodePortRange)
	if err != nil {
		return err
	}
	// The API server's own identity, as kube-apiserver's loopback client: exempt from the
	// in-flight limits (IPAddresses are created while a Service create is in flight).
	a, err := servicealloc.New(servicealloc.Config{Loopback: rest.CopyConfig(s.apiserverConfig), Store: s.Store, Ranges: ranges, Log: s.opts.Log.With("component", "service-allocator")})
	if err != nil {
		return err
	}
	if k, _ := s.Registry.Lookup(serviceAllocKinds[0]); k.Allocator == nil {
		k.Allocator = a
	}
	s.services = &servicesState{alloc: a, ranges: ranges}
	return nil
}

// startServices runs the allocator (default ServiceCIDR, repair loops) and this server's
// kubernetes Service controller until ctx ends, and returns once Services can be allocated
// (kube-apiserver's readiness waits for its repair loops the same way).
func (s *Server) startServices(ctx context.Context, wg *sync.WaitGroup) error {
	if s.services == nil {
		return nil
	}
	log := s.opts.Log
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.services.alloc.Start(ctx); err != nil {
			log.Error("service allocator stopped", "err", err)
		}
	}()

	ip, err := kubernetesservice.PublicAddress(s.opts.AdvertiseAddress, s.opts.BindAddress)
	if err != nil {
		log.Warn("no address to list this server under in the kubernetes Service; set --advertise-address", "err", err)
	} else {
		ctrl, err := kubernetesservice.New(rest.CopyConfig(s.apiserverConfig), kubernetesservice.Options{
			ServiceIP:  s.services.ranges.KubernetesServiceIP(),
			PublicIP:   ip,
			PublicPort: int32(s.listener.Addr().(*net.TCPAddr).Port),
			Identity:   s.leaderIdentity(),
			Log:        log.With("controller", "kubernetes-service"),
		})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = ctrl.Start(ctx)
		}()
	}
	select {
	case <-s.services.alloc.Ready():
	case <-ctx.Done():
	}
	return nil
}

// servingHosts are the serving certificate's extra names, as kube-apiserver's self-signed
// certificate: the advertise address, the bind address unless it is a wildcard, the address
// the kubernetes Service lists (kubernetesservice.PublicAddress: with a wildcard bind, the
// host's default interface address) and that Service's cluster IP, which pods dial.
func servingHosts(o Options) []string {
	var hosts []string
	if o.AdvertiseAddress != "" {
		hosts = append(hosts, o.AdvertiseAddress)
	}
	ip := net.ParseIP(o.BindAddress)
	if ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, o.BindAddress)
	}
	if ip == nil || ip.IsUnspecified() {
		if pub, err := kubernetesservice.PublicAddress(o.AdvertiseAddress, o.BindAddress); err == nil {
			hosts = append(hosts, pub.String())
		}
	}
	if r, err := servicealloc.ParseRanges(o.ServiceClusterIPRange, o.ServiceNodePortRange); err == nil {
		if svc := r.KubernetesServiceIP(); svc != nil {
			hosts = append(hosts, svc.String())
		}
	}
	return hosts
}
