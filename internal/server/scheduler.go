package server

import (
	"log/slog"

	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"kubeos.dev/kube/internal/scheduler"
)

// SchedulerOptions configure the in-process scheduler (internal/scheduler).
type SchedulerOptions struct {
	// DisableScheduler leaves scheduling to an external kube-scheduler (--scheduler=false).
	DisableScheduler bool
	// SchedulerConfigFile is a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)
	// with the profiles, plugins, weights and percentageOfNodesToScore
	// (--scheduler-config); empty means upstream's default profile.
	SchedulerConfigFile string

	schedulerConfig *config.KubeSchedulerConfiguration // read by validate
}

// validate reads --scheduler-config strictly: an unknown field or plugin refuses the start
// with a message naming it.
func (o *SchedulerOptions) validate() error {
	if o.DisableScheduler || o.SchedulerConfigFile == "" {
		return nil
	}
	cfg, err := scheduler.LoadConfigFile(o.SchedulerConfigFile)
	if err != nil {
		return err
	}
	o.schedulerConfig = cfg
	return nil
}

// schedulerControllers are elected controllers of the in-process scheduler (internal/scheduler); startElectedControllers runs them
// after electedControllers. The Lease is kube-system/kube-scheduler, as kube-scheduler's.
var schedulerControllers = []electedController{
	{name: "scheduler", new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		if s.opts.DisableScheduler {
			// No Lease either: an external kube-scheduler takes kube-system/kube-scheduler.
			return nil, nil
		}
		return scheduler.New(cfg, scheduler.Options{Config: s.opts.schedulerConfig, Registerer: s.metrics, Log: log})
	}},
}
