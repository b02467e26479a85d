package server

// core/v1 ComponentStatus, `kubectl get componentstatuses` (`cs`).
//
// kube-apiserver v1.37 answers it by probing, on every read, https://127.0.0.1:10259/healthz
// (scheduler), https://127.0.0.1:10257/healthz (controller-manager) and each etcd storage
// backend (etcd-0): components it assumes run beside it with their default ports. A `kube
// server` runs its scheduler and controllers in process instead, each leader-elected on a
// Lease in kube-system across the servers sharing its etcd, and opens no such ports. So a
// ComponentStatus says whether some process does the component's job:
//
//   - etcd-0: the etcd check of /healthz (a count-only read through the server's etcd
//     client, the embedded member or --etcd-servers), "ok" or its error. Like upstream's,
//     one entry for the storage backend however many endpoints it has; etcd-1, etcd-2, …
//     are the clusters of --etcd-servers-overrides in their order (/healthz's
//     etcd-override-0, -1, …), as upstream lists one entry per storage configuration.
//   - scheduler: Healthy when kube-system/kube-scheduler is held and renewed within its
//     duration — by the scheduler of any Kube server, or by an external kube-scheduler,
//     which takes the same Lease. With --scheduler=false and no live Lease (an external
//     kube-scheduler with --leader-elect=false) it is probed as upstream probes it.
//   - controller-manager: Healthy when every controller group Kube runs in place of
//     kube-controller-manager's controllers (kube-system/kube-<name>: the namespace, garbage
//     collector, service account, certificates, workload and enabled cluster controllers)
//     is led by some server. With --disable-workload-controllers an external
//     kube-controller-manager does that work: it must also hold
//     kube-system/kube-controller-manager or answer upstream's probe.
//
// Conditions are upstream's: type Healthy, status True with message "ok", False with the
// error when the component is known not to run, Unknown when a probe could not tell.

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/cluster/ports"
	"k8s.io/kubernetes/pkg/probe"
	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"kubeos.dev/kube/internal/controllers/leader"
	"kubeos.dev/kube/internal/controllers/nodeipam"
	"kubeos.dev/kube/internal/registry"
)

// The ComponentStatus names, listed in this order, then etcd-0, etcd-1, ….
const (
	csScheduler         = "scheduler"
	csControllerManager = "controller-manager"
)

// Leases of the external components, as kube-scheduler and kube-controller-manager name
// them.
const (
	schedulerLease         = "kube-scheduler"
	controllerManagerLease = "kube-controller-manager"
)

// wireComponentStatus gives the ComponentStatus kind (internal/registry/workload) its
// reads.
func (s *Server) wireComponentStatus() {
	k, ok := s.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "componentstatuses"})
	if !ok {
		return
	}
	k.Read = &componentStatuses{
		now: time.Now,
		leases: func(ctx context.Context) (map[string]*coordinationv1.Lease, error) {
			l, err := s.apiserverClient.CoordinationV1().Leases(leader.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			out := make(map[string]*coordinationv1.Lease, len(l.Items))
			for i := range l.Items {
				out[l.Items[i].Name] = &l.Items[i]
			}
			return out, nil
		},
		etcd: etcdChecks(&health{client: s.client, overrides: s.Store.Clusters()[1:]}),
		probe: func(port int) (probe.Result, string, error) {
			// Upstream's probe, as kube-apiserver configures it.
			hs := &componentstatus.HttpServer{EnableHTTPS: true, TLSConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream's: the components serve self-signed certificates
				Addr: "127.0.0.1", Port: port, Path: "/healthz"}
			return hs.DoServerCheck()
		},
		schedulerExternal:   s.opts.DisableScheduler,
		controllersExternal: s.opts.DisableWorkloadControllers,
		controllerLeases:    s.controllerLeases(),
	}
}

// etcdChecks are h's etcd checks: the main cluster's, then each override cluster's.
func etcdChecks(h *health) []func(context.Context) error {
	var out []func(context.Context) error
	for _, c := range h.checks(false) {
		if c.name == "etcd" || strings.HasPrefix(c.name, "etcd-override-") {
			out = append(out, c.run)
		}
	}
	return out
}

// controllerLeases are the Leases of the controller groups that stand for
// kube-controller-manager on this server: the built-in, workload and enabled cluster
// controllers (not the scheduler, local volumes or simulated nodes, which are not
// kube-controller-manager's).
func (s *Server) controllerLeases() []string {
	var out []string
	for _, c := range slices.Concat(electedControllers, workloadControllers) {
		out = append(out, "kube-"+c.name)
	}
	o := &s.opts.ClusterControllerOptions
	for _, c := range clusterControllers {
		if !clusterControllerEnabled(c.name, o.ClusterControllers) || (c.name == nodeipam.Name && o.NoNodeCIDRAllocation) {
			continue
		}
		out = append(out, "kube-"+c.name)
	}
	return out
}

// componentStatuses computes the ComponentStatus objects (registry.Kind.Read).
type componentStatuses struct {
	now func() time.Time
	// leases lists the Leases of kube-system by name.
	leases func(ctx context.Context) (map[string]*coordinationv1.Lease, error)
	// etcd are the etcd health checks: etcd-0 (the main cluster), etcd-1, … (overrides).
	etcd []func(ctx context.Context) error
	// probe is upstream's probe of a component's /healthz on 127.0.0.1:port.
	probe func(port int) (probe.Result, string, error)
	// schedulerExternal and controllersExternal say an external kube-scheduler or
	// kube-controller-manager does the job (--scheduler=false,
	// --disable-workload-controllers).
	schedulerExternal, controllersExternal bool
	// controllerLeases are the Leases of Kube's controller groups.
	controllerLeases []string
}

var _ registry.ComputedReader = (*componentStatuses)(nil)

// Get implements registry.ComputedReader.
func (cs *componentStatuses) Get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	if !slices.Contains(cs.names(), name) {
		// Upstream names the resource in the singular here.
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "componentstatus"}, name)
	}
	objs, err := cs.compute(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	return objs[0], nil
}

// List implements registry.ComputedReader.
func (cs *componentStatuses) List(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return cs.compute(ctx, cs.names())
}

// names are the ComponentStatus names, in the order they are listed.
func (cs *componentStatuses) names() []string {
	out := []string{csScheduler, csControllerManager}
	for i := range cs.etcd {
		out = append(out, fmt.Sprintf("etcd-%d", i))
	}
	return out
}

// compute checks the named components at once (a probe may take upstream's 20 seconds).
func (cs *componentStatuses) compute(ctx context.Context, names []string) ([]*unstructured.Unstructured, error) {
	var (
		leases   map[string]*coordinationv1.Lease
		leaseErr error
	)
	if slices.Contains(names, csScheduler) || slices.Contains(names, csControllerManager) {
		leases, leaseErr = cs.leases(ctx)
	}
	conds := make([]corev1.ComponentCondition, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			switch {
			case strings.HasPrefix(name, "etcd-"):
				// names() made the name, so its index is in range.
				k, _ := strconv.Atoi(strings.TrimPrefix(name, "etcd-"))
				conds[i] = etcdCondition(cs.etcd[k](ctx))
			case leaseErr != nil:
				conds[i] = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionUnknown,
					Error: fmt.Sprintf("reading the Leases of %s: %v", leader.Namespace, leaseErr)}
			case name == csScheduler:
				conds[i] = cs.scheduler(leases)
			case name == csControllerManager:
				conds[i] = cs.controllerManager(leases)
			}
		})
	}
	wg.Wait()
	out := make([]*unstructured.Unstructured, len(names))
	for i, name := range names {
		obj := &corev1.ComponentStatus{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ComponentStatus"},
			ObjectMeta: metav1.ObjectMeta{Name: name}, Conditions: []corev1.ComponentCondition{conds[i]}}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out[i] = &unstructured.Unstructured{Object: m}
	}
	return out, nil
}

func (cs *componentStatuses) scheduler(leases map[string]*coordinationv1.Lease) corev1.ComponentCondition {
	c := ledCondition(leases, []string{schedulerLease}, cs.now())
	if c.Status != corev1.ConditionTrue && cs.schedulerExternal {
		return probeCondition(cs.probe(kubeschedulerconfig.DefaultKubeSchedulerPort))
	}
	return c
}

func (cs *componentStatuses) controllerManager(leases map[string]*coordinationv1.Lease) corev1.ComponentCondition {
	now := cs.now()
	c := ledCondition(leases, cs.controllerLeases, now)
	if c.Status != corev1.ConditionTrue || !cs.controllersExternal {
		return c
	}
	if ext := ledCondition(leases, []string{controllerManagerLease}, now); ext.Status == corev1.ConditionTrue {
		return ext
	}
	return probeCondition(cs.probe(ports.KubeControllerManagerPort))
}

// ledCondition is Healthy when every named Lease is held and was renewed within its
// duration at now; otherwise False, the error naming each Lease that is not and why.
func ledCondition(leases map[string]*coordinationv1.Lease, names []string, now time.Time) corev1.ComponentCondition {
	var down []string
	for _, n := range names {
		if why := leaseDown(leases[n], now); why != "" {
			down = append(down, fmt.Sprintf("%s/%s %s", leader.Namespace, n, why))
		}
	}
	if len(down) == 0 {
		return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
	}
	return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse,
		Error: "no leader: Lease " + strings.Join(down, ", ")}
}

// leaseDown says why l shows no live leader at now, or "" when it does.
func leaseDown(l *coordinationv1.Lease, now time.Time) string {
	switch {
	case l == nil:
		return "does not exist"
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		return "is not held"
	case l.Spec.RenewTime == nil:
		return "was never renewed"
	}
	d := leader.DefaultLeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if late := now.Sub(l.Spec.RenewTime.Time); late > d {
		return fmt.Sprintf("held by %s was last renewed %s ago (its duration is %s)", *l.Spec.HolderIdentity, late.Round(time.Second), d)
	}
	return ""
}

// etcdCondition is upstream's condition of an etcd probe.
func etcdCondition(err error) corev1.ComponentCondition {
	if err != nil {
		return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
	}
	return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
}

// probeCondition is upstream's condition of an HTTP probe (componentstatus.REST).
func probeCondition(r probe.Result, msg string, err error) corev1.ComponentCondition {
	c := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionStatus(componentstatus.ToConditionStatus(r)), Message: msg}
	if err != nil {
		c.Error = err.Error()
	}
	return c
}
