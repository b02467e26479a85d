package servicealloc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // core/v1 conversions and defaults in legacyscheme
	"k8s.io/kubernetes/pkg/controlplane/controller/defaultservicecidr"
	"k8s.io/kubernetes/pkg/registry/core/service/allocator"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	ipcontroller "k8s.io/kubernetes/pkg/registry/core/service/ipallocator/controller"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
	portcontroller "k8s.io/kubernetes/pkg/registry/core/service/portallocator/controller"
	svcstorage "k8s.io/kubernetes/pkg/registry/core/service/storage"
	netutils "k8s.io/utils/net"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

// DefaultRepairInterval is how often the repair loops rescan every Service, IPAddress and
// the node port bitmap (upstream's default).
const DefaultRepairInterval = 3 * time.Minute

// Config configures the allocator.
type Config struct {
	// Loopback is a client configuration for this server with the rights of the API server
	// itself (system:masters: IPAddresses, ServiceCIDRs, Services, Events; exempt from the
	// in-flight limits, since IPAddresses are created while a Service create is in flight).
	Loopback *rest.Config
	// Store is the object store; it holds the node port bitmap (NodePortsKey).
	Store *storage.Store
	// Ranges are the cluster IP ranges and the node port range (ParseRanges).
	Ranges Ranges
	// RepairInterval defaults to DefaultRepairInterval.
	RepairInterval time.Duration
	// Log defaults to discarding.
	Log *slog.Logger
}

// Allocator allocates the cluster IPs and node ports of core/v1 Services, as kube-apiserver
// does (see the package documentation). It is a registry.Allocator; Start runs what keeps
// it working.
type Allocator struct {
	cfg      Config
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	metas    []*ipallocator.MetaAllocator
	ports    *rangeStore
	rest     *svcstorage.REST
	ipRepair *ipcontroller.RepairIPAddress
	npRepair *portcontroller.Repair

	ready     chan struct{}
	readyOnce sync.Once
}

var _ registry.Allocator = (*Allocator)(nil)

// New builds the allocator. Nothing runs until Start; until Start's first repairs are done
// (Ready), allocations fail as upstream's do before its informers sync.
func New(cfg Config) (*Allocator, error) {
	if cfg.Loopback == nil || cfg.Store == nil {
		return nil, errors.New("servicealloc: Loopback and Store are required")
	}
	if len(cfg.Ranges.ServiceCIDRs) == 0 || cfg.Ranges.NodePorts.Size == 0 {
		return nil, errors.New("servicealloc: Ranges are required (ParseRanges)")
	}
	if cfg.RepairInterval <= 0 {
		cfg.RepairInterval = DefaultRepairInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	lcfg := rest.CopyConfig(cfg.Loopback)
	lcfg.UserAgent = "kube-apiserver/service-allocator"
	cs, err := kubernetes.NewForConfig(lcfg)
	if err != nil {
		return nil, err
	}
	a := &Allocator{cfg: cfg, client: cs, factory: informers.NewSharedInformerFactory(cs, 0), ready: make(chan struct{})}
	cidrs := a.factory.Networking().V1().ServiceCIDRs()
	ips := a.factory.Networking().V1().IPAddresses()

	// One IPAddress-object allocator per family (upstream's MetaAllocator; with
	// DisableAllocatorDualWrite locked on, no bitmap is written beside it).
	byFamily := map[api.IPFamily]ipallocator.Interface{}
	for _, cidr := range cfg.Ranges.ServiceCIDRs {
		m, err := ipallocator.NewMetaAllocator(cs.NetworkingV1(), cidrs, ips, netutils.IsIPv6CIDR(cidr), nil)
		if err != nil {
			a.destroy()
			return nil, fmt.Errorf("cluster IP allocator for %s: %w", cidr, err)
		}
		a.metas = append(a.metas, m)
		byFamily[m.IPFamily()] = m
	}
	primary := api.IPv4Protocol
	if netutils.IsIPv6CIDR(cfg.Ranges.ServiceCIDRs[0]) {
		primary = api.IPv6Protocol
	}

	nodePorts, err := portallocator.New(cfg.Ranges.NodePorts, func(max int, rangeSpec string, offset int) (allocator.Interface, error) {
		a.ports = newRangeStore(allocator.NewAllocationMapWithOffset(max, rangeSpec, offset), cfg.Store, NodePortsKey)
		return a.ports, nil
	})
	if err != nil {
		a.destroy()
		return nil, fmt.Errorf("node port allocator: %w", err)
	}

	// Upstream's Service REST storage, used only for its create, update and delete hooks
	// (storage/alloc.go: ipFamilies and ipFamilyPolicy, cluster IPs, node ports, health
	// check node ports, their release). Its store is never used: the registry stores.
	a.rest, _, _, err = svcstorage.NewREST(generic.RESTOptions{
		StorageConfig:  &storagebackend.ConfigForResource{},
		Decorator:      refusedDecorator,
		ResourcePrefix: "services",
	}, primary, byFamily, nodePorts, nil, nil, nil)
	if err != nil {
		a.destroy()
		return nil, fmt.Errorf("service allocation hooks: %w", err)
	}

	a.ipRepair = ipcontroller.NewRepairIPAddress(cfg.RepairInterval, cs, a.factory.Core().V1().Services(), cidrs, ips)
	a.npRepair = portcontroller.NewRepair(cfg.RepairInterval, cs.CoreV1(), cs.EventsV1(), cfg.Ranges.NodePorts, a.ports)
	return a, nil
}

// hasRange says m has built the allocator of at least one ServiceCIDR. MetaAllocator does not
// say so itself; its DryRun returns an empty *Allocator exactly when it has none. (Free
// cannot tell: with no range it is minus the addresses in use.)
func hasRange(m *ipallocator.MetaAllocator) bool {
	_, none := m.DryRun().(*ipallocator.Allocator)
	return !none
}

func (a *Allocator) destroy() {
	for _, m := range a.metas {
		m.Destroy()
	}
}

// Ready is closed once the default ServiceCIDR exists, the informers have synced and both
// repair loops have completed a pass (the node port bitmap exists): from then on Services
// can be allocated. The server reports ready only after it, as kube-apiserver's
// start-service-ip-repair-controllers post-start hook gates /readyz.
func (a *Allocator) Ready() <-chan struct{} { return a.ready }

// Start runs the informers, the default ServiceCIDR controller (ServiceCIDR "kubernetes" for
// the configured ranges) and the two repair loops until ctx ends. Every server runs it, as
// every kube-apiserver does: all its writes are compare-and-swap.
func (a *Allocator) Start(ctx context.Context) error {
	defer a.destroy()
	log := a.cfg.Log
	a.factory.Start(ctx.Done())
	defer a.factory.Shutdown()

	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	context.AfterFunc(ctx, func() { close(stop) })

	var secondary net.IPNet
	if len(a.cfg.Ranges.ServiceCIDRs) > 1 {
		secondary = *a.cfg.Ranges.ServiceCIDRs[1]
	}
	// Start returns once the default ServiceCIDR exists (or ctx ends) and keeps syncing it.
	defaultservicecidr.NewController(*a.cfg.Ranges.ServiceCIDRs[0], secondary, a.client).Start(ctx)
	if ctx.Err() != nil {
		return nil
	}

	ipDone, npDone := make(chan struct{}), make(chan struct{})
	var ipOnce, npOnce sync.Once
	wg.Add(2)
	go func() {
		defer wg.Done()
		a.ipRepair.RunUntil(func() { ipOnce.Do(func() { close(ipDone) }) }, stop)
	}()
	go func() {
		defer wg.Done()
		a.npRepair.RunUntil(func() { npOnce.Do(func() { close(npDone) }) }, stop)
	}()
	for _, ch := range []chan struct{}{ipDone, npDone} {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
	// The allocators pick up the default ServiceCIDR from their informer in their own
	// worker; wait for them so that the first Service does not find no range at all.
	for _, m := range a.metas {
		for !hasRange(m) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	log.Info("service allocation ready", "serviceCIDRs", fmt.Sprint(a.cfg.Ranges.ServiceCIDRs), "nodePorts", a.cfg.Ranges.NodePorts.String())
	a.readyOnce.Do(func() { close(a.ready) })
	<-ctx.Done()
	return nil
}

// BeginCreate initialises the IP family fields and allocates the cluster IPs and node ports
// of a new Service (upstream's beginCreate), writing them into obj's spec.
func (a *Allocator) BeginCreate(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (func(ctx context.Context, stored bool), error) {
	svc, err := toInternal(obj)
	if err != nil {
		return nil, err
	}
	finish, err := a.rest.Store.BeginCreate(ctx, svc, &metav1.CreateOptions{DryRun: dryRunFlag(dryRun)})
	if err != nil {
		return nil, err
	}
	if err := writeSpec(obj, svc); err != nil {
		finish(ctx, false)
		return nil, err
	}
	return finish, nil
}

// BeginUpdate carries over what the old Service holds (patchAllocatedValues), allocates what
// the new one needs (type changes, dual-stack upgrades) and, once stored, releases what it
// no longer holds (upstream's beginUpdate).
func (a *Allocator) BeginUpdate(ctx context.Context, obj, old *unstructured.Unstructured, dryRun bool) (func(ctx context.Context, stored bool), error) {
	svc, err := toInternal(obj)
	if err != nil {
		return nil, err
	}
	oldSvc, err := toInternal(old)
	if err != nil {
		return nil, err
	}
	finish, err := a.rest.Store.BeginUpdate(ctx, svc, oldSvc, &metav1.UpdateOptions{DryRun: dryRunFlag(dryRun)})
	if err != nil {
		return nil, err
	}
	if err := writeSpec(obj, svc); err != nil {
		finish(ctx, false)
		return nil, err
	}
	return finish, nil
}

// AfterDelete releases the cluster IPs and node ports of a deleted Service.
func (a *Allocator) AfterDelete(ctx context.Context, obj *unstructured.Unstructured) {
	svc, err := toInternal(obj)
	if err != nil {
		a.cfg.Log.Error("release a deleted Service's allocations", "service", obj.GetNamespace()+"/"+obj.GetName(), "err", err)
		return
	}
	a.rest.Store.AfterDelete(svc, &metav1.DeleteOptions{})
}

func dryRunFlag(dryRun bool) []string {
	if dryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// toInternal converts a v1 Service to upstream's internal type, with the v1 defaults applied
// (as decoding applies them in kube-apiserver; applying them again changes nothing).
func toInternal(obj *unstructured.Unstructured) (*api.Service, error) {
	var v1svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &v1svc); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding Service: %v", err))
	}
	legacyscheme.Scheme.Default(&v1svc)
	svc := &api.Service{}
	if err := legacyscheme.Scheme.Convert(&v1svc, svc, nil); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("converting Service: %v", err))
	}
	return svc, nil
}

// writeSpec replaces obj's spec with svc's: allocation changes nothing else.
func writeSpec(obj *unstructured.Unstructured, svc *api.Service) error {
	var v1svc corev1.Service
	if err := legacyscheme.Scheme.Convert(svc, &v1svc, nil); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("converting Service: %w", err))
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1svc)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("converting Service: %w", err))
	}
	obj.Object["spec"] = u["spec"]
	return nil
}
