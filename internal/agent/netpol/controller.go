package netpol

import (
	"context"

	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
)

// DefaultTable is the nftables table's default name.
const DefaultTable = "kube-netpol"

// bridgeNF is the switch that sends bridged IPv4 through the ip hooks (br_netfilter).
const bridgeNF = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// Options configure a Controller.
type Options struct {
	// Client reads Pods, Namespaces and NetworkPolicies (cluster-wide; the node's client).
	Client kubernetes.Interface
	// NodeName: the pods whose spec.nodeName it is are filtered here.
	NodeName string
	// Table is the nftables table (family ip; default DefaultTable).
	Table string
	// Log receives the messages.
	Log *slog.Logger
}

// Controller keeps the node's table in step with the cluster's NetworkPolicies.
type Controller struct {
	opts  Options
	log   *slog.Logger
	table *Table
	kick  chan struct{}
}

// New makes a controller; Prepare checks the kernel, Run runs it.
func New(o Options) *Controller {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Controller{opts: o, log: o.Log.With("component", "netpol"), table: NewTable(o.Table), kick: make(chan struct{}, 1)}
}

// Prepare turns on br_netfilter's bridge-nf-call-iptables (pod-to-pod traffic on the
// bridge must reach the forward hook) and programs an empty table, so that a node without
// nftables says so at start.
func (c *Controller) Prepare() error {
	if err := os.WriteFile(bridgeNF, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("netpol: NetworkPolicy needs br_netfilter (%s): %w", bridgeNF, err)
	}
	if err := c.table.Sync(Program{Sets: map[string][]Interval{}, Pods: map[netip.Addr]PodProgram{}}); err != nil {
		return fmt.Errorf("netpol: NetworkPolicy needs nftables: %w", err)
	}
	return nil
}

// Run watches and programs until ctx ends. The table stays when it returns (the kernel
// keeps enforcing; the next start replaces it in one transaction).
func (c *Controller) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(c.opts.Client, 0)
	pods, nss, pols := f.Core().V1().Pods(), f.Core().V1().Namespaces(), f.Networking().V1().NetworkPolicies()
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), nss.Informer(), pols.Informer()} {
		h := cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.trigger() },
			UpdateFunc: func(old, new any) {
				if relevantChange(old, new) {
					c.trigger()
				}
			},
			DeleteFunc: func(any) { c.trigger() },
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("netpol: %w", err)
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("netpol: %v informer did not sync", typ)
		}
	}
	c.log.Info("NetworkPolicy enforcement running", "table", c.opts.Table)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := 100 * time.Millisecond
	c.trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-retry.C:
		}
		if err := c.syncOnce(pods.Lister(), nss.Lister(), pols.Lister()); err != nil {
			c.log.Error("NetworkPolicy programming failed; retrying", "err", err, "in", backoff)
			retry.Reset(backoff)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

func (c *Controller) trigger() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Controller) syncOnce(pl corelisters.PodLister, nl corelisters.NamespaceLister, npl netlisters.NetworkPolicyLister) error {
	start := time.Now()
	s, err := stateFrom(c.opts.NodeName, pl, nl, npl)
	if err != nil {
		return err
	}
	prog, errs := Compute(s)
	for _, e := range errs {
		c.log.Warn("NetworkPolicy left out", "err", e)
	}
	if err := c.table.Sync(prog); err != nil {
		return err
	}
	c.log.Debug("NetworkPolicy programmed", "localPods", len(prog.Pods), "sets", len(prog.Sets), "took", time.Since(start))
	return nil
}

// stateFrom reads the listers.
func stateFrom(node string, pl corelisters.PodLister, nl corelisters.NamespaceLister, npl netlisters.NetworkPolicyLister) (State, error) {
	var s State
	nss, err := nl.List(labels.Everything())
	if err != nil {
		return s, fmt.Errorf("netpol: namespaces: %w", err)
	}
	s.Namespaces = make(map[string]map[string]string, len(nss))
	for _, ns := range nss {
		s.Namespaces[ns.Name] = ns.Labels
	}
	pods, err := pl.List(labels.Everything())
	if err != nil {
		return s, fmt.Errorf("netpol: pods: %w", err)
	}
	for _, p := range pods {
		if pp, ok := podOf(p, node); ok {
			s.Pods = append(s.Pods, pp)
		}
	}
	pols, err := npl.List(labels.Everything())
	if err != nil {
		return s, fmt.Errorf("netpol: networkpolicies: %w", err)
	}
	s.Policies = pols
	return s, nil
}

// podOf is what Compute needs of p (false for pods that take no part: host network, no
// IPv4 address yet, or finished — their address may already be someone else's).
func podOf(p *corev1.Pod, node string) (Pod, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Pod{}, false
	}
	var ip netip.Addr
	ips := []string{p.Status.PodIP}
	for _, pip := range p.Status.PodIPs {
		ips = append(ips, pip.IP)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && a.Is4() {
			ip = a
			break
		}
	}
	if !ip.IsValid() {
		return Pod{}, false
	}
	var ports []corev1.ContainerPort
	for _, ctr := range p.Spec.Containers {
		ports = append(ports, ctr.Ports...)
	}
	return Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, IP: ip, Ports: ports, Local: p.Spec.NodeName == node}, true
}

// relevantChange says whether an update can change the Program: for a pod what podOf
// reads, for a namespace its labels; a NetworkPolicy always.
func relevantChange(old, new any) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		if !ok {
			return true
		}
		op, oin := podOf(o, "")
		np, nin := podOf(n, "")
		return oin != nin || o.Spec.NodeName != n.Spec.NodeName || !reflect.DeepEqual(op, np)
	case *corev1.Namespace:
		n, ok := new.(*corev1.Namespace)
		return !ok || !maps.Equal(o.Labels, n.Labels)
	}
	return true
}
