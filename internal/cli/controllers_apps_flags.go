package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/controllers/cronjob"
	"kubeos.dev/kube/internal/controllers/daemonset"
	"kubeos.dev/kube/internal/controllers/deployment"
	"kubeos.dev/kube/internal/controllers/disruption"
	"kubeos.dev/kube/internal/controllers/job"
	"kubeos.dev/kube/internal/controllers/replicaset"
	"kubeos.dev/kube/internal/controllers/replicationcontroller"
	"kubeos.dev/kube/internal/controllers/statefulset"
	"kubeos.dev/kube/internal/controllers/ttlafterfinished"
	"kubeos.dev/kube/internal/server"
)

// addWorkloadControllerFlags adds the flags of the workload controllers
// (internal/controllers/{deployment,replicaset,statefulset,daemonset,job,cronjob,…}): the
// worker counts under kube-controller-manager's flag names and defaults.
func addWorkloadControllerFlags(f *pflag.FlagSet, o *server.WorkloadControllerOptions) {
	f.BoolVar(&o.DisableWorkloadControllers, "disable-workload-controllers", false, "Do not run the Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job, CronJob, TTL-after-finished and disruption controllers (to run kube-controller-manager's instead).")
	f.IntVar(&o.ConcurrentDeploymentSyncs, "concurrent-deployment-syncs", deployment.DefaultWorkers, "The number of Deployments synced at once.")
	f.IntVar(&o.ConcurrentReplicaSetSyncs, "concurrent-replicaset-syncs", replicaset.DefaultWorkers, "The number of ReplicaSets synced at once.")
	f.IntVar(&o.ConcurrentRCSyncs, "concurrent-rc-syncs", replicationcontroller.DefaultWorkers, "The number of ReplicationControllers synced at once.")
	f.IntVar(&o.ConcurrentStatefulSetSyncs, "concurrent-statefulset-syncs", statefulset.DefaultWorkers, "The number of StatefulSets synced at once.")
	f.IntVar(&o.ConcurrentDaemonSetSyncs, "concurrent-daemonset-syncs", daemonset.DefaultWorkers, "The number of DaemonSets synced at once.")
	f.IntVar(&o.ConcurrentJobSyncs, "concurrent-job-syncs", job.DefaultWorkers, "The number of Jobs synced at once.")
	f.IntVar(&o.ConcurrentCronJobSyncs, "concurrent-cron-job-syncs", cronjob.DefaultWorkers, "The number of CronJobs synced at once.")
	f.IntVar(&o.ConcurrentTTLAfterFinishedSyncs, "concurrent-ttl-after-finished-syncs", ttlafterfinished.DefaultWorkers, "The number of finished Jobs examined for ttlSecondsAfterFinished at once.")
	f.IntVar(&o.ConcurrentDisruptionSyncs, "concurrent-disruption-syncs", disruption.DefaultWorkers, "The number of PodDisruptionBudgets synced at once.")
}
