package routes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// DefaultResync is how often Run re-syncs without a Node change (an interface that came
// back, a route deleted by hand).
const DefaultResync = 30 * time.Second

// Options configure a Controller.
type Options struct {
	// Client lists and watches Nodes.
	Client kubernetes.Interface
	// NodeName is this node: it gets no route to itself.
	NodeName string
	// ClusterCIDR limits what is programmed and owned to pod CIDRs inside it ("" = any).
	ClusterCIDR string
	// Resync (default DefaultResync).
	Resync time.Duration
	// Handle is the netlink handle (default: the process's network namespace).
	Handle *netlink.Handle
	// Log receives what was programmed.
	Log *slog.Logger
}

// Controller keeps the routes to the other nodes' pod CIDRs; New prepares it, Run runs it.
type Controller struct {
	o   Options
	k   *kernel
	log *slog.Logger
}

// New checks the options.
func New(o Options) (*Controller, error) {
	if o.Client == nil || o.NodeName == "" {
		return nil, errors.New("routes: a client and a node name are required")
	}
	cluster, err := parseCluster(o.ClusterCIDR)
	if err != nil {
		return nil, err
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	k, err := newKernel(o.Handle, cluster)
	if err != nil {
		return nil, err
	}
	return &Controller{o: o, k: k, log: o.Log.With("component", "node-routes")}, nil
}

func parseCluster(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("routes: cluster CIDR: %w", err)
	}
	return p.Masked(), nil
}

// Run watches Nodes and keeps the routes until ctx ends (they stay in the kernel after it;
// Cleanup removes them).
func (c *Controller) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(c.o.Client, 0)
	inf := f.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	trigger := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trigger() },
		UpdateFunc: func(any, any) { trigger() },
		DeleteFunc: func(any) { trigger() },
	}); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	lister := inf.Lister()
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil
	}
	tick := time.NewTicker(c.o.Resync)
	defer tick.Stop()
	var last string
	for {
		nodes, err := lister.List(labels.Everything())
		if err == nil {
			err = c.Sync(nodes)
		}
		if err != nil && err.Error() != last {
			c.log.Warn("routes to other nodes' pods", "err", err)
		}
		if err != nil {
			last = err.Error()
		} else {
			last = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

// Sync makes the kernel's routes those wanted for nodes; it goes on past a failing route
// and returns every error.
func (c *Controller) Sync(nodes []*corev1.Node) error {
	peers, conflicts := Peers(c.o.NodeName, nodes, c.k.cluster)
	var errs []error
	for _, cf := range conflicts {
		errs = append(errs, fmt.Errorf("routes: pod CIDR claimed twice: %s", cf))
	}
	want := map[netip.Prefix]Route{}
	for _, p := range peers {
		link, gw, err := c.k.nexthop(p.NodeIP)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", p.Node, err))
			continue
		}
		want[p.PodCIDR] = Route{Dst: p.PodCIDR, Gateway: gw, Link: link}
	}
	have, err := c.k.owned()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	write, remove := Plan(have, want)
	for _, r := range write {
		if err := c.k.replace(r); err != nil {
			errs = append(errs, err)
			continue
		}
		c.log.Info("route to a node's pods", "podCIDR", r.Dst, "via", r.Gateway, "link", r.Link)
	}
	for _, dst := range remove {
		if err := c.k.remove(dst); err != nil {
			errs = append(errs, err)
			continue
		}
		c.log.Info("route to a node's pods removed", "podCIDR", dst)
	}
	return errors.Join(errs...)
}

// Cleanup removes every route of Protocol inside clusterCIDR ("" = every one) in the
// namespace of h (nil: the process's). Absent routes are no error.
func Cleanup(h *netlink.Handle, clusterCIDR string) error {
	cluster, err := parseCluster(clusterCIDR)
	if err != nil {
		return err
	}
	k, err := newKernel(h, cluster)
	if err != nil {
		return err
	}
	have, err := k.owned()
	if err != nil {
		return err
	}
	var errs []error
	for dst := range have {
		if err := k.remove(dst); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
