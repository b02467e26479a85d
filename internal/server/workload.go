package server

import (
	"context"
	"slices"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/registry/workload"
)

// wireWorkload gives the workload kinds (internal/registry/workload, registered with the
// built-in kinds) what their subresources act through: pods/binding writes the pod in
// storage, pods/eviction reads budgets and deletes pods through a loopback client;
// ComponentStatus is computed from the server's etcd check and the controllers' Leases.
func (s *Server) wireWorkload() {
	workload.Wire(s.Registry, &workload.Deps{Store: s.Store, Client: s.apiserverClient})
	workload.SetNamespaceClient(s.apiserverClient.CoreV1().Namespaces())
	s.wireComponentStatus() // componentstatus.go
}

// authorizeWorkload gives the workload strategies that authorize within a write (a
// PodCertificateRequest's signer) the RBAC decisions.
func (s *Server) authorizeWorkload() {
	workload.SetAuthorizer(func(_ context.Context, a authorizer.Attributes) bool {
		u := a.GetUser()
		if u == nil {
			return false
		}
		if slices.Contains(u.GetGroups(), "system:masters") {
			return true
		}
		snap := s.auth.authz.Snapshot()
		return snap != nil && snap.Allows(&rbac.Attributes{User: u.GetName(), Groups: u.GetGroups(), ResourceRequest: a.IsResourceRequest(),
			Verb: a.GetVerb(), APIGroup: a.GetAPIGroup(), Resource: a.GetResource(), Subresource: a.GetSubresource(),
			Namespace: a.GetNamespace(), Name: a.GetName(), Path: a.GetPath()})
	})
}
