package server

import (
	"log/slog"

	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/controllers/localpath"
)

// localPathControllers run the local-path provisioner (internal/controllers/localpath): it
// ensures the StorageClass local-path (the default class when no other is) when it starts
// leading, and provisions PersistentVolumes on the node agents for claims of that class. It
// reaches the agents through nodes/<node>/proxy with its own identity (cluster-admin through
// the controllers' group). startElectedControllers runs them after the cluster controllers.
var localPathControllers = []electedController{
	{name: localpath.Name, new: func(_ *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		return localpath.New(cfg, localpath.Options{Log: log})
	}},
}
