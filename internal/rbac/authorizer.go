package rbac

import (
	"context"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
)

// Authorizer decides requests with the current Snapshot. The zero value is not usable; use
// NewAuthorizer.
type Authorizer struct {
	snap   atomic.Pointer[Snapshot]
	synced chan struct{}
}

var _ filters.Authorizer = (*Authorizer)(nil)

// NewAuthorizer returns an authorizer with an empty snapshot (only system:masters is
// allowed until Start has synced).
func NewAuthorizer() *Authorizer {
	a := &Authorizer{synced: make(chan struct{})}
	a.snap.Store(Build(nil, nil, nil, nil))
	return a
}

// Snapshot is the snapshot decisions use now.
func (a *Authorizer) Snapshot() *Snapshot { return a.snap.Load() }

// SetSnapshot replaces the snapshot (tests, benchmarks).
func (a *Authorizer) SetSnapshot(s *Snapshot) { a.snap.Store(s) }

// Synced is closed once Start has built the first snapshot from complete lists.
func (a *Authorizer) Synced() <-chan struct{} { return a.synced }

// Start keeps the snapshot current from informers over cs (a loopback client that may read
// every RBAC object); it blocks until ctx ends. Each batch of changes rebuilds the snapshot
// once from the informers' caches.
func (a *Authorizer) Start(ctx context.Context, cs kubernetes.Interface) error {
	f := informers.NewSharedInformerFactory(cs, 0)
	rbac := f.Rbac().V1()
	roles, clusterRoles := rbac.Roles(), rbac.ClusterRoles()
	roleBindings, clusterRoleBindings := rbac.RoleBindings(), rbac.ClusterRoleBindings()
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify}
	for _, inf := range []cache.SharedIndexInformer{roles.Informer(), clusterRoles.Informer(), roleBindings.Informer(), clusterRoleBindings.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("rbac: %v informer did not sync", typ)
		}
	}
	rebuild := func() error {
		r, err := roles.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		cr, err := clusterRoles.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		rb, err := roleBindings.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		crb, err := clusterRoleBindings.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		a.snap.Store(Build(r, cr, rb, crb))
		return nil
	}
	if err := rebuild(); err != nil {
		return err
	}
	close(a.synced)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			if err := rebuild(); err != nil {
				return err
			}
		}
	}
}

// Authorize implements filters.Authorizer.
func (a *Authorizer) Authorize(_ context.Context, u *request.User, info *request.Info) (bool, string) {
	attrs := AttributesOf(u, info)
	return a.snap.Load().Allows(&attrs), ""
}

// AttributesOf describes a request for the decision.
func AttributesOf(u *request.User, info *request.Info) Attributes {
	return Attributes{
		User: u.Name, Groups: u.Groups,
		ResourceRequest: info.IsResourceRequest, Verb: info.Verb,
		APIGroup: info.APIGroup, Resource: info.Resource, Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.AuthzName(), Path: info.Path,
	}
}
