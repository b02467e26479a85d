package platform

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// The Route kind: its effect is the gateway's (internal/gateway, run by the node agents,
// which read Routes themselves); the driver reports per hostname what Gateway API reports
// per parent — Accepted (the hostname is allowed) and ResolvedRefs (every backend's
// Component exposes the port and its Service exists; the TLS Certificate's Secret exists and
// covers the hostnames) — and is Active when all are True and its backends have been Active.
//
// A Route References its backends' Components (lifecycle.References): the tooling draws it
// under each (Application → Component → Route), it is deleted before them, and the engine
// holds it only while one does not exist. Waiting for them to be Active is the driver's,
// and only until the Route's first activation (routeWaiting): a Route first serves when its
// backends do, and stays Active through their later rollouts (a Release makes its Component
// Reconciling for the whole rollout the Route keeps serving). A Requires link would do the
// first and not the second.

// Gateway API's condition types and reasons used in Route status.
const (
	RouteAccepted             = "Accepted"
	RouteResolvedRefs         = "ResolvedRefs"
	ReasonAccepted            = "Accepted"
	ReasonNotAllowed          = "NotAllowedByListeners"
	ReasonResolvedRefs        = "ResolvedRefs"
	ReasonBackendNotFound     = "BackendNotFound"
	ReasonInvalidPort         = "UnsupportedValue"
	ReasonInvalidCertificate  = "InvalidCertificateRef"
	ReasonBackendsNotActive   = "BackendsNotActive"
	routeResolvePeriod        = 10 * time.Second
	AnnotationRouteHostnames  = "kubeos.dev/route-hostnames"
	routeComponentIndexPrefix = "component:"
)

// registerRoute registers the Route kind.
func registerRoute(e *lifecycle.Engine, o Options) error {
	d := &routeDriver{c: o.Client, cache: o.cached}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Route]{Kind: "Route", New: func() *v1alpha1.Route { return &v1alpha1.Route{} },
		Driver: d, MaxConcurrentReconciles: 4,
		Dependencies: routeTLSCertificate, References: routeBackends,
		Watches: []lifecycle.Watch{
			{Object: &v1alpha1.Component{}, Map: d.mapByComponent},
			{Object: &corev1.Service{}, Map: d.mapByComponent},
			{Object: &v1alpha1.Certificate{}, Map: d.mapByCertificate},
		}})
}

// routeBackends are the backends' Components (References).
func routeBackends(r *v1alpha1.Route) []lifecycle.Ref {
	var out []lifecycle.Ref
	for _, n := range backendNames(r) {
		out = append(out, lifecycle.Ref{Kind: "Component", Namespace: r.Namespace, Name: n})
	}
	return out
}

// backendNames are the backends' Component names, each once, in the order of the rules.
func backendNames(r *v1alpha1.Route) []string {
	var out []string
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.Backends {
			if !slices.Contains(out, b.Component) {
				out = append(out, b.Component)
			}
		}
	}
	return out
}

// routeTLSCertificate is the TLS Certificate (Requires: its Secret must exist to serve).
func routeTLSCertificate(r *v1alpha1.Route) []lifecycle.Ref {
	if r.Spec.TLS != nil && r.Spec.TLS.Certificate != "" {
		return []lifecycle.Ref{{Kind: "Certificate", Namespace: r.Namespace, Name: r.Spec.TLS.Certificate}}
	}
	return nil
}

// routeWaiting names the backends a Route waits for: those whose Component is not Active
// (phases by name), as long as the Route has not been activated yet (activated: its Ready
// condition is True). Once it has, nothing: a backend's later rollout does not stop it.
func routeWaiting(activated bool, backends []string, phases map[string]lifecycle.Phase) []string {
	if activated {
		return nil
	}
	var out []string
	for _, b := range backends {
		if phases[b] != lifecycle.PhaseActive {
			out = append(out, b)
		}
	}
	return out
}

// routeDriver reads Routes, Components, Services and Certificates from the informer cache
// (cache: the lifecycle cache, whose phases the engine holds and wakes Routes by), Secrets
// and Tenants directly.
type routeDriver struct {
	c     client.Client
	cache func() client.Reader
}

// Observe writes the per-hostname conditions; a Route whose refs do not resolve stays
// Reconciling with the reason and is looked at again.
func (d *routeDriver) Observe(ctx context.Context, r *v1alpha1.Route) (lifecycle.Outcome, error) {
	reason, msg, phases, err := d.resolve(ctx, r)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	allowed, err := d.allowedHostnames(ctx, r.Namespace)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	var notAllowed []string
	var hs []v1alpha1.RouteHostnameStatus
	for _, h := range r.Spec.Hostnames {
		prev := v1alpha1.RouteHostnameStatus{Hostname: h}
		for _, s := range r.Status.Hostnames {
			if s.Hostname == h {
				prev = *s.DeepCopy()
			}
		}
		acc := metav1.Condition{Type: RouteAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted, Message: "served by the gateway", ObservedGeneration: r.Generation}
		if allowed != nil && !HostnameAllowed(h, allowed) {
			acc.Status, acc.Reason, acc.Message = metav1.ConditionFalse, ReasonNotAllowed, "the tenant's "+AnnotationRouteHostnames+" does not allow it"
			notAllowed = append(notAllowed, h)
		}
		res := metav1.Condition{Type: RouteResolvedRefs, Status: metav1.ConditionTrue, Reason: ReasonResolvedRefs, Message: "all references resolved", ObservedGeneration: r.Generation}
		if reason != "" {
			res.Status, res.Reason, res.Message = metav1.ConditionFalse, reason, msg
		}
		meta.SetStatusCondition(&prev.Conditions, acc)
		meta.SetStatusCondition(&prev.Conditions, res)
		hs = append(hs, prev)
	}
	r.Status.Hostnames = hs
	switch {
	case len(notAllowed) > 0:
		return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: ReasonNotAllowed,
			Message: "hostnames not allowed for the tenant: " + strings.Join(notAllowed, ", "), RequeueAfter: time.Minute}, nil
	case reason != "":
		return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: reason, Message: msg,
			RequeueAfter: routeResolvePeriod}, nil
	}
	activated := meta.IsStatusConditionTrue(r.Status.Conditions, lifecycle.ConditionReady)
	if waiting := routeWaiting(activated, backendNames(r), phases); len(waiting) > 0 {
		// A backend becoming Active wakes the Route (the engine wakes what refers to an
		// object whose phase changed); the requeue is the safety net.
		var parts []string
		for _, b := range waiting {
			parts = append(parts, fmt.Sprintf("Component %s is %s", b, firstNonEmptyStr(string(phases[b]), string(lifecycle.PhasePending))))
		}
		return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: ReasonBackendsNotActive,
			Message: "waiting for the backends to be Active before first serving: " + strings.Join(parts, ", "), RequeueAfter: routeResolvePeriod}, nil
	}
	return lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "Routed"}, nil
}

func (d *routeDriver) Provision(context.Context, *v1alpha1.Route) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}
func (d *routeDriver) Update(context.Context, *v1alpha1.Route) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}

// Deprovision has nothing to remove: the gateways drop the Route when it is gone.
func (d *routeDriver) Deprovision(context.Context, *v1alpha1.Route) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}

// resolve checks the backends and the certificate: a reason ("" when all resolve), a
// message, and the phase of each backend's Component by name.
func (d *routeDriver) resolve(ctx context.Context, r *v1alpha1.Route) (string, string, map[string]lifecycle.Phase, error) {
	phases := map[string]lifecycle.Phase{}
	for i, rule := range r.Spec.Rules {
		for _, b := range rule.Backends {
			var comp v1alpha1.Component
			if err := d.cache().Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: b.Component}, &comp); err != nil {
				if apierrors.IsNotFound(err) {
					return ReasonBackendNotFound, fmt.Sprintf("rule %d: Component %s not found", i, b.Component), nil, nil
				}
				return "", "", nil, err
			}
			phases[b.Component] = comp.Status.Phase
			if _, err := ExposedPort(comp.Spec.Exposes, b); err != nil {
				return ReasonInvalidPort, fmt.Sprintf("rule %d: Component %s: %v", i, b.Component, err), nil, nil
			}
			var svc corev1.Service
			if err := d.cache().Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: b.Component}, &svc); err != nil {
				if apierrors.IsNotFound(err) {
					return ReasonBackendNotFound, fmt.Sprintf("rule %d: Service %s not found", i, b.Component), nil, nil
				}
				return "", "", nil, err
			}
		}
	}
	if r.Spec.TLS != nil {
		var cert v1alpha1.Certificate
		if err := d.cache().Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Spec.TLS.Certificate}, &cert); err != nil {
			if apierrors.IsNotFound(err) {
				return ReasonInvalidCertificate, "Certificate " + r.Spec.TLS.Certificate + " not found", nil, nil
			}
			return "", "", nil, err
		}
		if bad := UncoveredHostnames(r.Spec.Hostnames, cert.Spec.DNSNames); len(bad) > 0 {
			return ReasonInvalidCertificate, fmt.Sprintf("Certificate %s does not cover %s", cert.Name, strings.Join(bad, ", ")), nil, nil
		}
		name := cert.Spec.SecretName
		if name == "" {
			name = cert.Name
		}
		var s corev1.Secret
		if err := d.c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return ReasonInvalidCertificate, "the Secret " + name + " of Certificate " + cert.Name + " does not exist yet", nil, nil
			}
			return "", "", nil, err
		}
	}
	return "", "", phases, nil
}

// allowedHostnames reads the tenant's allowed hostname patterns (nil: no limit).
func (d *routeDriver) allowedHostnames(ctx context.Context, namespace string) ([]string, error) {
	tenant, err := TenantOf(ctx, d.c, namespace)
	if err != nil || tenant == "" {
		return nil, err
	}
	return tenantHostnames(ctx, d.c, tenant)
}

// tenantHostnames is the Tenant's AnnotationRouteHostnames as a list (nil: the annotation
// is absent, no limit).
func tenantHostnames(ctx context.Context, r client.Reader, tenant string) ([]string, error) {
	var t v1alpha1.Tenant
	if err := r.Get(ctx, client.ObjectKey{Name: tenant}, &t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	v, ok := t.Annotations[AnnotationRouteHostnames]
	if !ok {
		return nil, nil
	}
	out := []string{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

func (d *routeDriver) mapByComponent(ctx context.Context, obj client.Object) []types.NamespacedName {
	return d.mapRoutes(ctx, obj.GetNamespace(), func(r *v1alpha1.Route) bool {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.Backends {
				if b.Component == obj.GetName() {
					return true
				}
			}
		}
		return false
	})
}

func (d *routeDriver) mapByCertificate(ctx context.Context, obj client.Object) []types.NamespacedName {
	return d.mapRoutes(ctx, obj.GetNamespace(), func(r *v1alpha1.Route) bool {
		return r.Spec.TLS != nil && r.Spec.TLS.Certificate == obj.GetName()
	})
}

func (d *routeDriver) mapRoutes(ctx context.Context, ns string, f func(*v1alpha1.Route) bool) []types.NamespacedName {
	var list v1alpha1.RouteList
	if err := d.cache().List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []types.NamespacedName
	for i := range list.Items {
		if f(&list.Items[i]) {
			out = append(out, types.NamespacedName{Namespace: ns, Name: list.Items[i].Name})
		}
	}
	return out
}

// ExposedPort is the Component port a backend names: by number, by name, or the only one.
func ExposedPort(exposes []v1alpha1.ComponentPort, b v1alpha1.RouteBackend) (v1alpha1.ComponentPort, error) {
	var names []string
	for _, p := range exposes {
		names = append(names, fmt.Sprintf("%s/%d", p.Name, p.Port))
		switch {
		case b.Port != 0 && p.Port == b.Port && (b.PortName == "" || b.PortName == p.Name):
			return p, nil
		case b.Port == 0 && b.PortName != "" && p.Name == b.PortName:
			return p, nil
		}
	}
	switch {
	case len(exposes) == 0:
		return v1alpha1.ComponentPort{}, fmt.Errorf("exposes no port")
	case b.Port == 0 && b.PortName == "" && len(exposes) == 1:
		return exposes[0], nil
	case b.Port == 0 && b.PortName == "":
		return v1alpha1.ComponentPort{}, fmt.Errorf("exposes several ports (%s): name one", strings.Join(names, ", "))
	}
	return v1alpha1.ComponentPort{}, fmt.Errorf("does not expose port %s (it exposes %s)", portName(b), strings.Join(names, ", "))
}

func portName(b v1alpha1.RouteBackend) string {
	if b.PortName != "" && b.Port == 0 {
		return b.PortName
	}
	return fmt.Sprint(b.Port)
}

// UncoveredHostnames are the hostnames no DNS name of a certificate covers (x509 rules: a
// "*." name covers exactly one label; a wildcard hostname needs the same wildcard).
func UncoveredHostnames(hostnames, dnsNames []string) []string {
	var out []string
	for _, h := range hostnames {
		h = strings.ToLower(h)
		ok := slices.ContainsFunc(dnsNames, func(n string) bool {
			n = strings.ToLower(n)
			if n == h {
				return true
			}
			suffix, wild := strings.CutPrefix(n, "*")
			if !wild || strings.HasPrefix(h, "*") {
				return false
			}
			label, rest, found := strings.Cut(h, ".")
			return found && label != "" && "."+rest == suffix
		})
		if !ok {
			out = append(out, h)
		}
	}
	return out
}

// HostnameAllowed reports whether a Route hostname falls under one of a tenant's patterns:
// an exact name, or "*.<domain>" for any name (or wildcard) below <domain>.
func HostnameAllowed(h string, patterns []string) bool {
	h = strings.ToLower(h)
	for _, p := range patterns {
		if p == h {
			return true
		}
		if suffix, ok := strings.CutPrefix(p, "*"); ok {
			name := strings.TrimPrefix(h, "*")
			if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
				return true
			}
		}
	}
	return false
}

// HostnamesOverlap reports whether two Route hostnames can serve one request host (equal,
// one wildcard covering the other name, or nested wildcards).
func HostnamesOverlap(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if a == b {
		return true
	}
	covers := func(w, n string) bool {
		suffix, ok := strings.CutPrefix(w, "*")
		if !ok {
			return false
		}
		n = strings.TrimPrefix(n, "*")
		return strings.HasSuffix(n, suffix) && len(n) > len(suffix)
	}
	return covers(a, b) || covers(b, a)
}
