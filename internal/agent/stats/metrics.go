package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryFunc measures the node (the Provider's Summary).
type SummaryFunc func(ctx context.Context, cpuAndMemoryOnly bool) (*statsapi.Summary, error)

// scrapeTimeout bounds one scrape's measurement.
const scrapeTimeout = 10 * time.Second

// NewResourceCollector is the kubelet's resource metrics collector (/metrics/resource)
// over summary: these names, labels and units are what metrics-server parses.
func NewResourceCollector(summary SummaryFunc) prometheus.Collector {
	return &table{summary: summary, cpuAndMemoryOnly: true, rows: resourceSeries, scrapeErrors: []*prometheus.Desc{
		prometheus.NewDesc("scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
		prometheus.NewDesc("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
	}}
}

// NewCadvisorCollector is cAdvisor-shaped container metrics (/metrics/cadvisor) over
// summary, for the containers of pods, with the labels cAdvisor's kubelet endpoint gives
// them (container "" is the pod as a whole). A failed measurement is a collection error.
func NewCadvisorCollector(summary SummaryFunc) prometheus.Collector {
	return &table{summary: summary, rows: cadvisorSeries}
}

// NewVolumeCollector is the kubelet's volume stats collector (on its /metrics): the
// kubelet_volume_stats_* gauges of every PersistentVolumeClaim mounted by a pod of the
// node, once per claim, labelled namespace and persistentvolumeclaim. A failed measurement
// yields no series, as the kubelet's.
func NewVolumeCollector(summary SummaryFunc) prometheus.Collector {
	return &table{summary: summary, rows: volumeSeries, failSilently: true}
}

// level is what of a Summary a series reads.
type level int

const (
	nodeLevel      level = iota // the node
	podLevel                    // each pod
	containerLevel              // each container of each pod
	interfaceLevel              // each network interface of each pod
	claimLevel                  // each PVC-backed volume, once per claim
)

// target is the node, a pod, one of its containers, interfaces or claims' volumes.
type target struct {
	node      *statsapi.NodeStats
	pod       *statsapi.PodStats
	container *statsapi.ContainerStats
	iface     *statsapi.InterfaceStats
	volume    *statsapi.VolumeStats
}

// series is one row of a collector's table: a metric, the level of targets it reads, their
// label values and their value.
type series struct {
	desc  *prometheus.Desc
	vt    prometheus.ValueType
	level level
	// stamp puts the value's measurement time on the sample (the resource endpoint's).
	stamp  bool
	labels func(target) []string
	// value is t's sample, ok false when t has none.
	value func(t target) (v float64, at time.Time, ok bool)
}

// table is a collector of series over one Summary per scrape.
type table struct {
	summary          SummaryFunc
	cpuAndMemoryOnly bool
	rows             []series
	// scrapeErrors are gauges of the measurement's failure (1) or success (0). Without
	// them a failure is a collection error, or nothing with failSilently.
	scrapeErrors []*prometheus.Desc
	failSilently bool
}

var _ prometheus.Collector = (*table)(nil)

func (c *table) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, r := range c.rows {
		if !seen[r.desc] {
			seen[r.desc] = true
			ch <- r.desc
		}
	}
	for _, d := range c.scrapeErrors {
		ch <- d
	}
}

func (c *table) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s, err := c.summary(ctx, c.cpuAndMemoryOnly)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	for _, d := range c.scrapeErrors {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, failed)
	}
	if err != nil {
		if len(c.scrapeErrors) == 0 && !c.failSilently {
			ch <- prometheus.NewInvalidMetric(c.rows[0].desc, err)
		}
		return
	}
	walk(s, func(l level, t target) {
		for _, r := range c.rows {
			if r.level != l {
				continue
			}
			v, at, ok := r.value(t)
			if !ok {
				continue
			}
			m := prometheus.MustNewConstMetric(r.desc, r.vt, v, r.labels(t)...)
			if r.stamp {
				m = prometheus.NewMetricWithTimestamp(at, m)
			}
			ch <- m
		}
	})
}

// walk visits the targets of s.
func walk(s *statsapi.Summary, visit func(level, target)) {
	visit(nodeLevel, target{node: &s.Node})
	claims := map[statsapi.PVCReference]bool{}
	for i := range s.Pods {
		p := &s.Pods[i]
		visit(podLevel, target{pod: p})
		for j := range p.Containers {
			visit(containerLevel, target{pod: p, container: &p.Containers[j]})
		}
		if p.Network != nil {
			for j := range p.Network.Interfaces {
				visit(interfaceLevel, target{pod: p, iface: &p.Network.Interfaces[j]})
			}
		}
		for j := range p.VolumeStats {
			if v := &p.VolumeStats[j]; v.PVCRef != nil && !claims[*v.PVCRef] {
				claims[*v.PVCRef] = true
				visit(claimLevel, target{pod: p, volume: v})
			}
		}
	}
}

// Value readers.

func cpuSeconds(c *statsapi.CPUStats) (float64, time.Time, bool) {
	if c == nil || c.UsageCoreNanoSeconds == nil {
		return 0, time.Time{}, false
	}
	return float64(*c.UsageCoreNanoSeconds) / float64(time.Second), c.Time.Time, true
}

func memoryField(m *statsapi.MemoryStats, field func(*statsapi.MemoryStats) *uint64) (float64, time.Time, bool) {
	if m == nil {
		return 0, time.Time{}, false
	}
	return gauge(field(m))
}

func gauge(v *uint64) (float64, time.Time, bool) {
	if v == nil {
		return 0, time.Time{}, false
	}
	return float64(*v), time.Time{}, true
}

func workingSet(m *statsapi.MemoryStats) *uint64 { return m.WorkingSetBytes }
func usage(m *statsapi.MemoryStats) *uint64      { return m.UsageBytes }
func rss(m *statsapi.MemoryStats) *uint64        { return m.RSSBytes }

// The resource endpoint's series (the kubelet's resource metrics collector).
var (
	resourceContainerLabels = []string{"container", "pod", "namespace"}
	resourcePodLabels       = []string{"pod", "namespace"}
	resourceSeries          = []series{
		{desc: prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil),
			vt: prometheus.CounterValue, level: nodeLevel, stamp: true, labels: noLabels,
			value: func(t target) (float64, time.Time, bool) { return cpuSeconds(t.node.CPU) }},
		{desc: prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil),
			vt: prometheus.GaugeValue, level: nodeLevel, stamp: true, labels: noLabels,
			value: func(t target) (float64, time.Time, bool) { return stampedMemory(t.node.Memory) }},
		{desc: prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", resourceContainerLabels, nil),
			vt: prometheus.CounterValue, level: containerLevel, stamp: true, labels: resourceContainer,
			value: func(t target) (float64, time.Time, bool) { return cpuSeconds(t.container.CPU) }},
		{desc: prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", resourceContainerLabels, nil),
			vt: prometheus.GaugeValue, level: containerLevel, stamp: true, labels: resourceContainer,
			value: func(t target) (float64, time.Time, bool) { return stampedMemory(t.container.Memory) }},
		{desc: prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", resourceContainerLabels, nil),
			vt: prometheus.GaugeValue, level: containerLevel, labels: resourceContainer,
			value: func(t target) (float64, time.Time, bool) {
				return float64(t.container.StartTime.UnixNano()) / float64(time.Second), time.Time{}, true
			}},
		{desc: prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", resourcePodLabels, nil),
			vt: prometheus.CounterValue, level: podLevel, stamp: true, labels: resourcePod,
			value: func(t target) (float64, time.Time, bool) { return cpuSeconds(t.pod.CPU) }},
		{desc: prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", resourcePodLabels, nil),
			vt: prometheus.GaugeValue, level: podLevel, stamp: true, labels: resourcePod,
			value: func(t target) (float64, time.Time, bool) { return stampedMemory(t.pod.Memory) }},
	}
)

// stampedMemory is the working set with its measurement time.
func stampedMemory(m *statsapi.MemoryStats) (float64, time.Time, bool) {
	if m == nil || m.WorkingSetBytes == nil {
		return 0, time.Time{}, false
	}
	return float64(*m.WorkingSetBytes), m.Time.Time, true
}

func noLabels(target) []string { return nil }
func resourceContainer(t target) []string {
	return []string{t.container.Name, t.pod.PodRef.Name, t.pod.PodRef.Namespace}
}
func resourcePod(t target) []string { return []string{t.pod.PodRef.Name, t.pod.PodRef.Namespace} }

// The cAdvisor endpoint's series: a pod's own series (container "") beside its
// containers' where cAdvisor has both.
var (
	cadvisorLabels          = []string{"container", "namespace", "pod"}
	cadvisorNetworkLabels   = []string{"container", "interface", "namespace", "pod"}
	cadvisorCPUDesc         = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", cadvisorLabels, nil)
	cadvisorWorkingSetDesc  = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set in bytes.", cadvisorLabels, nil)
	cadvisorMemoryUsageDesc = prometheus.NewDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels, nil)
	cadvisorSeries          = []series{
		{desc: cadvisorCPUDesc, vt: prometheus.CounterValue, level: containerLevel, labels: cadvisorContainer,
			value: func(t target) (float64, time.Time, bool) { return cpuSeconds(t.container.CPU) }},
		{desc: cadvisorCPUDesc, vt: prometheus.CounterValue, level: podLevel, labels: cadvisorPod,
			value: func(t target) (float64, time.Time, bool) { return cpuSeconds(t.pod.CPU) }},
		{desc: cadvisorWorkingSetDesc, vt: prometheus.GaugeValue, level: containerLevel, labels: cadvisorContainer,
			value: func(t target) (float64, time.Time, bool) { return memoryField(t.container.Memory, workingSet) }},
		{desc: cadvisorWorkingSetDesc, vt: prometheus.GaugeValue, level: podLevel, labels: cadvisorPod,
			value: func(t target) (float64, time.Time, bool) { return memoryField(t.pod.Memory, workingSet) }},
		{desc: cadvisorMemoryUsageDesc, vt: prometheus.GaugeValue, level: containerLevel, labels: cadvisorContainer,
			value: func(t target) (float64, time.Time, bool) { return memoryField(t.container.Memory, usage) }},
		{desc: cadvisorMemoryUsageDesc, vt: prometheus.GaugeValue, level: podLevel, labels: cadvisorPod,
			value: func(t target) (float64, time.Time, bool) { return memoryField(t.pod.Memory, usage) }},
		{desc: prometheus.NewDesc("container_memory_rss", "Size of RSS in bytes.", cadvisorLabels, nil),
			vt: prometheus.GaugeValue, level: containerLevel, labels: cadvisorContainer,
			value: func(t target) (float64, time.Time, bool) { return memoryField(t.container.Memory, rss) }},
		{desc: prometheus.NewDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", cadvisorLabels, nil),
			vt: prometheus.GaugeValue, level: containerLevel, labels: cadvisorContainer,
			value: func(t target) (float64, time.Time, bool) {
				if t.container.Rootfs == nil {
					return 0, time.Time{}, false
				}
				return gauge(t.container.Rootfs.UsedBytes)
			}},
		{desc: prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", cadvisorLabels, nil),
			vt: prometheus.GaugeValue, level: containerLevel, labels: cadvisorContainer,
			value: func(t target) (float64, time.Time, bool) {
				return float64(t.container.StartTime.Unix()), time.Time{}, true
			}},
		{desc: prometheus.NewDesc("container_network_receive_bytes_total", "Cumulative count of bytes received", cadvisorNetworkLabels, nil),
			vt: prometheus.CounterValue, level: interfaceLevel, labels: cadvisorInterface,
			value: func(t target) (float64, time.Time, bool) { return gauge(t.iface.RxBytes) }},
		{desc: prometheus.NewDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", cadvisorNetworkLabels, nil),
			vt: prometheus.CounterValue, level: interfaceLevel, labels: cadvisorInterface,
			value: func(t target) (float64, time.Time, bool) { return gauge(t.iface.TxBytes) }},
		{desc: prometheus.NewDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", cadvisorNetworkLabels, nil),
			vt: prometheus.CounterValue, level: interfaceLevel, labels: cadvisorInterface,
			value: func(t target) (float64, time.Time, bool) { return gauge(t.iface.RxErrors) }},
		{desc: prometheus.NewDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", cadvisorNetworkLabels, nil),
			vt: prometheus.CounterValue, level: interfaceLevel, labels: cadvisorInterface,
			value: func(t target) (float64, time.Time, bool) { return gauge(t.iface.TxErrors) }},
	}
)

func cadvisorContainer(t target) []string {
	return []string{t.container.Name, t.pod.PodRef.Namespace, t.pod.PodRef.Name}
}
func cadvisorPod(t target) []string { return []string{"", t.pod.PodRef.Namespace, t.pod.PodRef.Name} }
func cadvisorInterface(t target) []string {
	return []string{"", t.iface.Name, t.pod.PodRef.Namespace, t.pod.PodRef.Name}
}

// The kubelet's volume stats series (pkg/kubelet/metrics/collectors/volume_stats.go).
var (
	volumeLabels = []string{"namespace", "persistentvolumeclaim"}
	volumeSeries = []series{
		volumeRow("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", func(f *statsapi.FsStats) *uint64 { return f.CapacityBytes }),
		volumeRow("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", func(f *statsapi.FsStats) *uint64 { return f.AvailableBytes }),
		volumeRow("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", func(f *statsapi.FsStats) *uint64 { return f.UsedBytes }),
		volumeRow("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", func(f *statsapi.FsStats) *uint64 { return f.Inodes }),
		volumeRow("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", func(f *statsapi.FsStats) *uint64 { return f.InodesFree }),
		volumeRow("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", func(f *statsapi.FsStats) *uint64 { return f.InodesUsed }),
	}
)

func volumeRow(name, help string, field func(*statsapi.FsStats) *uint64) series {
	return series{desc: prometheus.NewDesc(name, help, volumeLabels, nil), vt: prometheus.GaugeValue, level: claimLevel,
		labels: func(t target) []string { return []string{t.volume.PVCRef.Namespace, t.volume.PVCRef.Name} },
		value:  func(t target) (float64, time.Time, bool) { return gauge(field(&t.volume.FsStats)) }}
}
