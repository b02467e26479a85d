package server

import (
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/registry/workload"
)

// wireWorkload gives the workload kinds (internal/registry/workload, registered with the
// built-in kinds) what their subresources act through: pods/binding writes the pod in
// storage, pods/eviction reads budgets and deletes pods through a loopback client.
func (s *Server) wireWorkload() error {
	cfg, err := s.LoopbackConfig("system:apiserver", "system:masters")
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	workload.Wire(s.Registry, &workload.Deps{Store: s.Store, Client: cs})
	workload.SetNamespaceClient(cs.CoreV1().Namespaces())
	return nil
}
