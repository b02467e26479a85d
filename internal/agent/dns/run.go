package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The cluster DNS Service (kubeadm's name and labels).
const (
	ServiceNamespace = "kube-system"
	ServiceName      = "kube-dns"
	// NodeLocalAnnotation on the Service tells the Service proxy not to program it: every
	// node answers on its address itself.
	NodeLocalAnnotation = "kubeos.dev/node-local-dns"
)

// Options configure Run.
type Options struct {
	// Client reads Services, EndpointSlices and Namespaces (the node's identity may).
	Client kubernetes.Interface
	// Zone is the cluster domain (default cluster.local).
	Zone string
	// Address is where to answer; empty: the kube-dns Service's ClusterIP, followed when
	// it changes.
	Address string
	// Port is the DNS port (default 53); MetricsPort serves /metrics on the same address
	// (default 9153, -1: none).
	Port, MetricsPort int
	// Interface holds the address (created when missing); empty: the address is already
	// the host's and is left alone.
	Interface string
	// ResolvConf names the upstream servers (default /etc/resolv.conf).
	ResolvConf string
	// Registry receives the metrics (default: a new one, see Gatherer in Running).
	Registry *prometheus.Registry
	// Log receives the messages.
	Log *slog.Logger
	// Ready, when set, is called with each address once it answers there.
	Ready func(netip.Addr)
}

func (o *Options) defaults() {
	if o.Zone == "" {
		o.Zone = "cluster.local"
	}
	if o.Port == 0 {
		o.Port = 53
	}
	if o.MetricsPort == 0 {
		o.MetricsPort = 9153
	}
	if o.ResolvConf == "" {
		o.ResolvConf = "/etc/resolv.conf"
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Run keeps an Index from informers and answers on the address until ctx ends, moving
// when the kube-dns Service's ClusterIP changes. It takes the address off the interface
// when it stops.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	if o.Client == nil {
		return errors.New("dns: a client is required")
	}
	var fixed netip.Addr
	if o.Address != "" {
		a, err := netip.ParseAddr(o.Address)
		if err != nil {
			return fmt.Errorf("dns: address: %w", err)
		}
		fixed = a.Unmap()
	}
	metrics, err := NewMetrics(o.Registry)
	if err != nil {
		return fmt.Errorf("dns: metrics: %w", err)
	}
	idx := NewIndex()
	changed := make(chan struct{}, 1)
	if err := Watch(ctx, o.Client, idx, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}); err != nil {
		return err
	}
	current := func() netip.Addr {
		if fixed.IsValid() {
			return fixed
		}
		if a := idx.Addresses(ServiceNamespace, ServiceName); len(a) > 0 {
			return a[0]
		}
		return netip.Addr{}
	}
	addr := current()
	if !addr.IsValid() {
		o.Log.Info("cluster DNS waits for its Service's ClusterIP", "service", ServiceNamespace+"/"+ServiceName)
	}
	for {
		for !addr.IsValid() {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				addr = current()
			}
		}
		next, err := serveOn(ctx, o, idx, metrics, addr, current, changed)
		if err != nil || ctx.Err() != nil {
			return err
		}
		addr = next
	}
}

// serveOn answers on addr until ctx ends (returns the zero address) or the address
// changes (returns the new one).
func serveOn(ctx context.Context, o Options, idx *Index, metrics *Metrics, addr netip.Addr, current func() netip.Addr, changed <-chan struct{}) (netip.Addr, error) {
	if o.Interface != "" {
		if err := EnsureAddress(ctx, o.Interface, addr); err != nil {
			return netip.Addr{}, err
		}
		defer RemoveAddress(context.Background(), o.Interface, addr)
	}
	ups, err := Upstreams(o.ResolvConf, addr)
	if err != nil {
		o.Log.Warn("cluster DNS: no upstream servers; names outside the zone get SERVFAIL", "err", err)
	}
	hostPort := net.JoinHostPort(addr.String(), strconv.Itoa(o.Port))
	h := &Handler{
		Resolver: &Resolver{Zone: strings.ToLower(strings.TrimSuffix(o.Zone, ".")) + ".", Index: idx},
		Upstream: &Forwarder{Servers: ups, Cache: &Cache{}},
		Metrics:  metrics, Server: "dns://" + hostPort, Log: o.Log,
	}
	var l *Listener
	// The address may need a moment to become bindable after it was added.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err = Listen(hostPort, h)
		if err == nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return netip.Addr{}, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return netip.Addr{}, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- l.Serve(sctx) }()
	running := 1
	if o.MetricsPort > 0 {
		running++
		go func() {
			errc <- ServeMetrics(sctx, net.JoinHostPort(addr.String(), strconv.Itoa(o.MetricsPort)), o.Registry, o.Log)
		}()
	}
	o.Log.Info("cluster DNS answering", "address", hostPort, "zone", o.Zone, "upstreams", ups)
	if o.Ready != nil {
		o.Ready(addr)
	}
	wait := func() {
		cancel()
		for ; running > 0; running-- {
			<-errc
		}
	}
	for {
		select {
		case <-ctx.Done():
			wait()
			return netip.Addr{}, nil
		case err := <-errc:
			running--
			wait()
			if err == nil {
				err = errors.New("dns: listener stopped")
			}
			return netip.Addr{}, err
		case <-changed:
			if next := current(); next != addr {
				o.Log.Info("cluster DNS address changes", "from", addr, "to", next)
				wait()
				return next, nil
			}
		}
	}
}

// Watch feeds idx from Service, EndpointSlice and Namespace informers until ctx ends,
// returning once they have synced; changed (optional) is called after every update.
func Watch(ctx context.Context, client kubernetes.Interface, idx *Index, changed func()) error {
	if changed == nil {
		changed = func() {}
	}
	f := informers.NewSharedInformerFactory(client, 0)
	handler := func(set func(any), del func(any)) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { set(obj); changed() },
			UpdateFunc: func(_, obj any) { set(obj); changed() },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				del(obj)
				changed()
			},
		}
	}
	svc := f.Core().V1().Services().Informer()
	eps := f.Discovery().V1().EndpointSlices().Informer()
	nss := f.Core().V1().Namespaces().Informer()
	for _, reg := range []struct {
		inf      cache.SharedIndexInformer
		set, del func(any)
	}{
		{svc, func(o any) {
			if s, ok := o.(*corev1.Service); ok {
				idx.SetService(s)
			}
		}, func(o any) {
			if s, ok := o.(*corev1.Service); ok {
				idx.DeleteService(s.Namespace, s.Name)
			}
		}},
		{eps, func(o any) {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok {
				idx.SetEndpointSlice(s)
			}
		}, func(o any) {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok {
				idx.DeleteEndpointSlice(s.Namespace, s.Name)
			}
		}},
		{nss, func(o any) {
			if s, ok := o.(*corev1.Namespace); ok {
				idx.SetNamespace(s.Name)
			}
		}, func(o any) {
			if s, ok := o.(*corev1.Namespace); ok {
				idx.DeleteNamespace(s.Name)
			}
		}},
	} {
		if _, err := reg.inf.AddEventHandler(handler(reg.set, reg.del)); err != nil {
			return fmt.Errorf("dns: informer: %w", err)
		}
	}
	f.Start(ctx.Done())
	synced := f.WaitForCacheSync(ctx.Done())
	if !slices.Equal(mapValues(synced), []bool{true, true, true}) && ctx.Err() == nil {
		return errors.New("dns: informers did not sync")
	}
	return nil
}

func mapValues[K comparable](m map[K]bool) []bool {
	out := make([]bool, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
