package kubernetesservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// Upstream's defaults: the endpoint reconciler runs every 10 s and a server's entry lives
// 15 s past its last renewal (DefaultEndpointReconcilerInterval and ...TTL).
const (
	DefaultInterval      = 10 * time.Second
	DefaultLeaseDuration = 15 * time.Second
)

// leaseNamespace holds the server Leases, as upstream's identity Leases.
const leaseNamespace = metav1.NamespaceSystem

// Options configure one server's controller.
type Options struct {
	// ServiceIP is the Service's cluster IP (the range's first address). Required.
	ServiceIP net.IP
	// ServicePort is the Service's port; default 443.
	ServicePort int32
	// PublicIP and PublicPort are where this server serves: its advertise address
	// (PublicAddress) and secure port. Required.
	PublicIP   net.IP
	PublicPort int32
	// Identity tells this server from every other live one and stays the same across its
	// restarts (host and serving address). Required.
	Identity string
	// Interval and LeaseDuration default to DefaultInterval and DefaultLeaseDuration.
	Interval, LeaseDuration time.Duration
	// Log defaults to discarding.
	Log *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Controller keeps the default/kubernetes Service and this server's entry in its
// Endpoints and EndpointSlices.
type Controller struct {
	o      Options
	client kubernetes.Interface
	lease  string
	holder string
}

// New builds the controller on a client configuration with rights over Services,
// Endpoints, EndpointSlices and Leases in kube-system.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if o.ServiceIP == nil || o.PublicIP == nil || o.PublicPort <= 0 || o.Identity == "" {
		return nil, errors.New("kubernetesservice: ServiceIP, PublicIP, PublicPort and Identity are required")
	}
	if o.ServicePort == 0 {
		o.ServicePort = 443
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	name := LeaseName(o.Identity)
	return &Controller{o: o, client: cs, lease: name, holder: name + "_" + string(uuid.NewUUID())}, nil
}

// PublicAddress is the address a server is listed under: the advertise address, else the
// bind address unless it is a wildcard or loopback, else the host's default interface
// address — upstream's rule (Endpoints may not hold loopback addresses).
func PublicAddress(advertise, bind string) (net.IP, error) {
	if ip := netutils.ParseIPSloppy(advertise); ip != nil && !ip.IsUnspecified() {
		return ip, nil
	}
	ip := netutils.ParseIPSloppy(bind)
	if ip == nil {
		ip = net.IPv4zero
	}
	return utilnet.ResolveBindAddress(ip)
}

// Start runs until ctx ends: it waits until the server is ready, then every Interval
// renews this server's Lease, creates the Service if it is missing and rewrites the
// Endpoints and EndpointSlices from the live Leases. When ctx ends it deletes its Lease and
// removes itself from them (within 2 Intervals), so a stopping server leaves at once; a
// server that dies drops out when its Lease expires.
func (c *Controller) Start(ctx context.Context) error {
	log := c.o.Log
	// A server restarted after a crash is not listed until it is ready again.
	if err := c.client.CoordinationV1().Leases(leaseNamespace).Delete(ctx, c.lease, metav1.DeleteOptions{}); err == nil {
		log.Info("removed this server's stale entry from the kubernetes Service")
		if err := c.reconcileEndpoints(ctx, false); err != nil {
			// Alone, upstream's rule keeps the entry until this server lists itself again.
			log.Info("kubernetes Service endpoints left as they are until this server is ready", "reason", err)
		}
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, c.ready); err != nil {
		return nil
	}
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sync(ctx); err != nil && ctx.Err() == nil {
			log.Warn("kubernetes Service", "err", err)
		}
	}, c.o.Interval)

	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.o.Interval)
	defer cancel()
	if err := c.client.CoordinationV1().Leases(leaseNamespace).Delete(stopCtx, c.lease, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		log.Warn("remove this server's Lease", "err", err)
	}
	if err := c.reconcileEndpoints(stopCtx, true); err != nil {
		log.Warn("remove this server from the kubernetes Service", "err", err)
	}
	return nil
}

// ready asks the server's /readyz, as upstream's controller does before it lists itself.
func (c *Controller) ready(ctx context.Context) (bool, error) {
	var code int
	c.client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	return code == http.StatusOK, nil
}

// sync is one pass: Lease, Service, endpoints.
func (c *Controller) sync(ctx context.Context) error {
	if err := c.renew(ctx); err != nil {
		return fmt.Errorf("renew Lease %s: %w", c.lease, err)
	}
	if err := c.ensureService(ctx); err != nil {
		return fmt.Errorf("create Service: %w", err)
	}
	return c.reconcileEndpoints(ctx, false)
}

// renew creates or renews this server's Lease.
func (c *Controller) renew(ctx context.Context) error {
	leases := c.client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(c.o.Now())
	host, _ := os.Hostname()
	want := func(l *coordinationv1.Lease) {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[IdentityLabel] = IdentityValue
		if host != "" {
			l.Labels[corev1.LabelHostname] = host
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AddressAnnotation] = net.JoinHostPort(c.o.PublicIP.String(), strconv.Itoa(int(c.o.PublicPort)))
		l.Spec.HolderIdentity = ptr.To(c.holder)
		l.Spec.LeaseDurationSeconds = ptr.To(int32(c.o.LeaseDuration / time.Second))
		l.Spec.RenewTime = &now
	}
	cur, err := leases.Get(ctx, c.lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.lease, Namespace: leaseNamespace}}
		want(l)
		l.Spec.AcquireTime = &now
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	want(cur)
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// ensureService creates the kubernetes Service when it does not exist; an existing one is
// left as it is (upstream no longer reconciles it after the first start).
func (c *Controller) ensureService(ctx context.Context) error {
	svcs := c.client.CoreV1().Services(metav1.NamespaceDefault)
	if _, err := svcs.Get(ctx, ServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	_, err := svcs.Create(ctx, DesiredService(c.o.ServiceIP, c.o.ServicePort, c.o.PublicPort), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// reconcileEndpoints writes the Endpoints and EndpointSlices from the live Leases, and
// deletes Leases that have expired. Unless stopping, zero live Leases (this server has just
// renewed its own) means something is wrong and nothing is erased, as upstream refuses.
func (c *Controller) reconcileEndpoints(ctx context.Context, stopping bool) error {
	list, err := c.client.CoordinationV1().Leases(leaseNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{IdentityLabel: IdentityValue}.String(),
	})
	if err != nil {
		return err
	}
	now := c.o.Now()
	for i := range list.Items {
		l := &list.Items[i]
		if _, ok := memberOf(l); ok && l.Name != c.lease && Expired(l, now) {
			// As upstream's identity Lease collector: a server that died leaves its Lease.
			rv := l.ResourceVersion
			err := c.client.CoordinationV1().Leases(leaseNamespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.o.Log.Warn("delete expired server Lease", "lease", l.Name, "err", err)
			}
		}
	}
	members := LiveMembers(list.Items, now)
	if stopping {
		// Our Lease is deleted, but a list may still show it.
		self := Member{IP: c.o.PublicIP.String(), Port: c.o.PublicPort}
		kept := members[:0]
		for _, m := range members {
			if m != self {
				kept = append(kept, m)
			}
		}
		members = kept
	}
	if !stopping && len(members) == 0 {
		return errors.New("no API server addresses were listed in Leases, refusing to erase all endpoints for the kubernetes Service")
	}
	if err := c.writeEndpoints(ctx, members); err != nil {
		return fmt.Errorf("Endpoints: %w", err)
	}
	if err := c.writeSlices(ctx, members); err != nil {
		return fmt.Errorf("EndpointSlices: %w", err)
	}
	return nil
}

func (c *Controller) writeEndpoints(ctx context.Context, members []Member) error {
	eps := c.client.CoreV1().Endpoints(metav1.NamespaceDefault)
	subsets := DesiredSubsets(members)
	cur, err := eps.Get(ctx, ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: metav1.NamespaceDefault}}
		UpdateEndpoints(e, subsets)
		if _, err = eps.Create(ctx, e, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if !UpdateEndpoints(cur, subsets) {
		return nil
	}
	_, err = eps.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

func (c *Controller) writeSlices(ctx context.Context, members []Member) error {
	slices := c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	family := discoveryv1.AddressTypeIPv4
	if netutils.IsIPv6(c.o.ServiceIP) {
		family = discoveryv1.AddressTypeIPv6
	}
	desired := DesiredSlices(members, family)
	want := map[string]bool{}
	for _, s := range desired {
		want[s.Name] = true
		cur, err := slices.Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err = slices.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case err != nil:
			return err
		case cur.AddressType != s.AddressType:
			// The address type is immutable: replace the slice, as upstream does.
			if err := slices.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if _, err = slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return err
			}
		case !SliceUpToDate(cur, s):
			s.ResourceVersion = cur.ResourceVersion
			if _, err = slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	list, err := slices.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{discoveryv1.LabelServiceName: ServiceName}.String()})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if OwnSlice(s.Name) && !want[s.Name] {
			rv := s.ResourceVersion
			if err := slices.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	return nil
}
