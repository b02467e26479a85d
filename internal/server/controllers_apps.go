package server

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/controllers/cronjob"
	"kubeos.dev/kube/internal/controllers/daemonset"
	"kubeos.dev/kube/internal/controllers/deployment"
	"kubeos.dev/kube/internal/controllers/disruption"
	"kubeos.dev/kube/internal/controllers/job"
	"kubeos.dev/kube/internal/controllers/replicaset"
	"kubeos.dev/kube/internal/controllers/replicationcontroller"
	"kubeos.dev/kube/internal/controllers/statefulset"
	"kubeos.dev/kube/internal/controllers/ttlafterfinished"
)

// WorkloadControllerOptions configure the workload controllers
// (internal/controllers/{deployment,replicaset,replicationcontroller,statefulset,daemonset,
// job,cronjob,ttlafterfinished,disruption}). The worker counts are
// kube-controller-manager's --concurrent-*-syncs; zero means its default.
type WorkloadControllerOptions struct {
	// DisableWorkloadControllers keeps the workload controllers from running (for running
	// kube-controller-manager's against this server instead). Their Leases are still
	// taken, so a second server with them on does not run them either.
	DisableWorkloadControllers bool

	ConcurrentDeploymentSyncs       int
	ConcurrentReplicaSetSyncs       int
	ConcurrentRCSyncs               int
	ConcurrentStatefulSetSyncs      int
	ConcurrentDaemonSetSyncs        int
	ConcurrentJobSyncs              int
	ConcurrentCronJobSyncs          int
	ConcurrentTTLAfterFinishedSyncs int
	ConcurrentDisruptionSyncs       int
}

func (o *WorkloadControllerOptions) validate() error {
	for _, w := range []struct {
		flag string
		n    int
	}{
		{"concurrent-deployment-syncs", o.ConcurrentDeploymentSyncs},
		{"concurrent-replicaset-syncs", o.ConcurrentReplicaSetSyncs},
		{"concurrent-rc-syncs", o.ConcurrentRCSyncs},
		{"concurrent-statefulset-syncs", o.ConcurrentStatefulSetSyncs},
		{"concurrent-daemonset-syncs", o.ConcurrentDaemonSetSyncs},
		{"concurrent-job-syncs", o.ConcurrentJobSyncs},
		{"concurrent-cron-job-syncs", o.ConcurrentCronJobSyncs},
		{"concurrent-ttl-after-finished-syncs", o.ConcurrentTTLAfterFinishedSyncs},
		{"concurrent-disruption-syncs", o.ConcurrentDisruptionSyncs},
	} {
		if w.n < 0 {
			return fmt.Errorf("--%s must not be negative, got %d", w.flag, w.n)
		}
	}
	return nil
}

// workloadController makes an elected controller of one workload controller package:
// new gets the server's WorkloadControllerOptions.
func workloadController(name string, new func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error)) electedController {
	return electedController{name: name, new: func(s *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		o := &s.opts.WorkloadControllerOptions
		if o.DisableWorkloadControllers {
			return idle{}, nil
		}
		return new(cfg, o, log)
	}}
}

// idle is a controller that does nothing until ctx ends.
type idle struct{}

func (idle) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// workloadControllers are the workload controllers, each upstream's kube-controller-manager
// controller of the same name under its own identity and Lease; startElectedControllers
// runs them after electedControllers.
var workloadControllers = []electedController{
	workloadController(deployment.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return deployment.New(cfg, deployment.Options{Workers: o.ConcurrentDeploymentSyncs, Log: log})
	}),
	workloadController(replicaset.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return replicaset.New(cfg, replicaset.Options{Workers: o.ConcurrentReplicaSetSyncs, Log: log})
	}),
	workloadController(replicationcontroller.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return replicationcontroller.New(cfg, replicationcontroller.Options{Workers: o.ConcurrentRCSyncs, Log: log})
	}),
	workloadController(statefulset.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return statefulset.New(cfg, statefulset.Options{Workers: o.ConcurrentStatefulSetSyncs, Log: log})
	}),
	workloadController(daemonset.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return daemonset.New(cfg, daemonset.Options{Workers: o.ConcurrentDaemonSetSyncs, Log: log})
	}),
	workloadController(job.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return job.New(cfg, job.Options{Workers: o.ConcurrentJobSyncs, Log: log})
	}),
	workloadController(cronjob.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return cronjob.New(cfg, cronjob.Options{Workers: o.ConcurrentCronJobSyncs, Log: log})
	}),
	workloadController(ttlafterfinished.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return ttlafterfinished.New(cfg, ttlafterfinished.Options{Workers: o.ConcurrentTTLAfterFinishedSyncs, Log: log})
	}),
	workloadController(disruption.Name, func(cfg *rest.Config, o *WorkloadControllerOptions, log *slog.Logger) (starter, error) {
		return disruption.New(cfg, disruption.Options{Workers: o.ConcurrentDisruptionSyncs, Log: log})
	}),
}
