package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/simnode"
)

// addSimNodeFlags adds the flags of simulated nodes (internal/simnode).
func addSimNodeFlags(f *pflag.FlagSet, o *server.SimNodeOptions) {
	addSimulatorFlags(f, &o.SimNodes, "sim-")
}

// addSimulatorFlags adds the simulator's flags, each name prefixed ("sim-" in kube server,
// none in kube sim).
func addSimulatorFlags(f *pflag.FlagSet, o *simnode.Options, p string) {
	f.IntVar(&o.Nodes, p+"nodes", 0, "simulated nodes to register (no machines: pods bound to them go through a kubelet's statuses from a stage table)")
	f.StringVar(&o.Prefix, p+"node-prefix", simnode.DefaultPrefix, "name prefix of simulated nodes (<prefix>1 … <prefix>N)")
	f.StringVar(&o.CPU, p+"node-cpu", simnode.DefaultCPU, "CPU capacity of each simulated node")
	f.StringVar(&o.Memory, p+"node-memory", simnode.DefaultMemory, "memory capacity of each simulated node")
	f.IntVar(&o.Pods, p+"node-pods", simnode.DefaultPods, "pod capacity of each simulated node")
	f.IntVar(&o.Zones, p+"zones", simnode.DefaultZones, "zones the simulated nodes are spread over (topology.kubernetes.io/zone=zone-0 …)")
	f.DurationVar(&o.JobRunTime, p+"job-run-time", simnode.DefaultJobRunTime, "how long containers of pods with restartPolicy Never or OnFailure run before exiting 0 (annotation "+simnode.RunTimeAnnotation+" overrides; negative: forever)")
	f.StringVar(&o.StagesFile, p+"stages", "", "YAML list of pod stages replacing the defaults (see internal/simnode)")
	f.Float64Var(&o.QPS, p+"qps", simnode.DefaultQPS, "API requests per second the simulator makes at most")
	f.IntVar(&o.Workers, p+"workers", simnode.DefaultWorkers, "API requests the simulator has in flight at most")
	f.StringVar(&o.PodCIDR, p+"pod-cidr", simnode.DefaultPodCIDR, "range of pod addresses (a /24 per node) for nodes without spec.podCIDR")
	f.StringVar(&o.NodeIPRange, p+"node-ip-range", simnode.DefaultNodeIPRange, "range of the simulated nodes' InternalIPs")
}
