package server

import (
	"log/slog"

	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/simnode"
)

// SimNodeOptions configure simulated nodes (internal/simnode): `kube server --sim-nodes N`.
type SimNodeOptions struct {
	// SimNodes are the simulated nodes' options; SimNodes.Nodes = 0 (the default) runs none.
	SimNodes simnode.Options
}

func (o *SimNodeOptions) validate() error {
	if o.SimNodes.Nodes == 0 {
		return nil
	}
	c := o.SimNodes
	c.Complete()
	if err := c.Validate("sim-"); err != nil {
		return err
	}
	if c.Stages == nil && c.StagesFile != "" {
		if _, err := simnode.LoadStages(c.StagesFile); err != nil {
			return err
		}
	}
	return nil
}

// SimNodesName is the simulator's controller name: in HA only the server holding the
// Lease kube-system/kube-sim-nodes runs it.
const SimNodesName = "sim-nodes"

// simNodeControllers are elected controllers of simulated nodes (internal/simnode); startElectedControllers runs them
// after electedControllers. The simulator acts as its controller identity for its watches
// and impersonates each node (system:node:<name>, group system:nodes) for its writes.
var simNodeControllers = []electedController{
	{name: SimNodesName, new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		if s.opts.SimNodes.Nodes == 0 {
			return nil, nil // takes no Lease
		}
		return simnode.New(cfg, s.opts.SimNodes, log)
	}},
}
