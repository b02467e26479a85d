package simnode

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of Options, as a kubelet's capacity on a large machine and its cadence.
const (
	DefaultCPU                = "32"
	DefaultMemory             = "256Gi"
	DefaultPods               = 110
	DefaultZones              = 3
	DefaultPrefix             = "sim-"
	DefaultJobRunTime         = 10 * time.Second
	DefaultQPS                = 1000
	DefaultWorkers            = 32
	DefaultLeaseDuration      = 40 * time.Second
	DefaultLeaseRenewInterval = 10 * time.Second // 0.25 × the lease duration, as the kubelet
	DefaultStatusReport       = 5 * time.Minute  // the kubelet's nodeStatusReportFrequency
	DefaultPodCIDR            = "10.128.0.0/9"
	DefaultNodeIPRange        = "172.16.0.0/12"
)

// Options configure a Simulator. The zero value plus Complete is a simulator of no nodes.
type Options struct {
	// Nodes is how many simulated Nodes to register (--sim-nodes); 0 runs none.
	Nodes int
	// Prefix names them: <Prefix><i> for i in 1..Nodes. Default "sim-".
	Prefix string
	// CPU, Memory and Pods are each node's capacity and allocatable. Defaults 32, 256Gi, 110.
	CPU, Memory string
	Pods        int
	// Zones is how many zones (zone-0 … zone-<Zones-1>) the nodes are spread over
	// (topology.kubernetes.io/zone, round robin). Default 3.
	Zones int
	// JobRunTime is how long a container of a pod with restartPolicy Never or OnFailure
	// runs before it exits 0 (the annotation RunTimeAnnotation overrides it per pod).
	// Default 10 s; negative means they never finish.
	JobRunTime time.Duration
	// Stages replace the default stage table (DefaultStages) when set.
	Stages []Stage
	// StagesFile is a YAML or JSON list of stages read at start in place of the defaults
	// (--sim-stages); Stages wins when both are set.
	StagesFile string
	// QPS and Workers bound the API requests: a token bucket of QPS (burst QPS) and at most
	// Workers requests in flight. Defaults 1000 and 32.
	QPS     float64
	Workers int
	// PodCIDR is the range nodes without spec.podCIDR take their pod addresses from, a /24
	// per node in order. Default 10.128.0.0/9.
	PodCIDR string
	// NodeIPRange gives node i its InternalIP, the i-th address of the range.
	// Default 172.16.0.0/12.
	NodeIPRange string
	// LeaseDuration, LeaseRenewInterval and StatusReport are the kubelet's cadence: the
	// Lease's leaseDurationSeconds (40 s), how often it is renewed (10 s) and how often
	// an unchanged node status is reported anyway (5 min).
	LeaseDuration, LeaseRenewInterval, StatusReport time.Duration
}

// Complete fills the defaults.
func (o *Options) Complete() {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.CPU == "" {
		o.CPU = DefaultCPU
	}
	if o.Memory == "" {
		o.Memory = DefaultMemory
	}
	if o.Pods == 0 {
		o.Pods = DefaultPods
	}
	if o.Zones == 0 {
		o.Zones = DefaultZones
	}
	if o.JobRunTime == 0 {
		o.JobRunTime = DefaultJobRunTime
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.PodCIDR == "" {
		o.PodCIDR = DefaultPodCIDR
	}
	if o.NodeIPRange == "" {
		o.NodeIPRange = DefaultNodeIPRange
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = DefaultLeaseRenewInterval
	}
	if o.StatusReport == 0 {
		o.StatusReport = DefaultStatusReport
	}
}

// Validate names the first bad option by its flag (prefix is "sim-" in kube server and ""
// in kube sim).
func (o *Options) Validate(prefix string) error {
	if o.Nodes < 0 {
		return fmt.Errorf("--%snodes must not be negative", prefix)
	}
	if _, err := resource.ParseQuantity(o.CPU); err != nil {
		return fmt.Errorf("--%snode-cpu %q: %w", prefix, o.CPU, err)
	}
	if _, err := resource.ParseQuantity(o.Memory); err != nil {
		return fmt.Errorf("--%snode-memory %q: %w", prefix, o.Memory, err)
	}
	if o.Pods < 1 || o.Pods > 250 {
		return fmt.Errorf("--%snode-pods %d: must be 1 to 250 (a node's pod range is a /24)", prefix, o.Pods)
	}
	if o.Zones < 1 {
		return fmt.Errorf("--%szones must be at least 1", prefix)
	}
	if o.QPS < 1 || o.Workers < 1 {
		return fmt.Errorf("--%sqps and --%sworkers must be at least 1", prefix, prefix)
	}
	if _, _, err := parseRange(o.PodCIDR); err != nil {
		return fmt.Errorf("--%spod-cidr: %w", prefix, err)
	}
	base, size, err := parseRange(o.NodeIPRange)
	if err != nil {
		return fmt.Errorf("--%snode-ip-range: %w", prefix, err)
	}
	_ = base
	if uint64(o.Nodes)+2 > size {
		return fmt.Errorf("--%snode-ip-range %s holds fewer than %d node addresses", prefix, o.NodeIPRange, o.Nodes)
	}
	if _, _, err := parseRange(o.PodCIDR); err == nil {
		if _, size, _ := parseRange(o.PodCIDR); uint64(o.Nodes) > size/256 {
			return fmt.Errorf("--%spod-cidr %s holds fewer than %d /24 ranges", prefix, o.PodCIDR, o.Nodes)
		}
	}
	if o.LeaseRenewInterval <= 0 || o.LeaseDuration < o.LeaseRenewInterval {
		return errors.New("the lease renew interval must be positive and not longer than the lease duration")
	}
	return nil
}
