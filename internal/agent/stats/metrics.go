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

// The kubelet's /metrics/resource series: these names, labels and units are what
// metrics-server parses.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// NewResourceCollector is the kubelet's resource metrics collector (/metrics/resource)
// over summary.
func NewResourceCollector(summary SummaryFunc) prometheus.Collector {
	return resourceCollector{summary}
}

type resourceCollector struct{ summary SummaryFunc }

var _ prometheus.Collector = resourceCollector{}

func (resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerCPUDesc, containerMemoryDesc, containerStartDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s, err := c.summary(ctx, true)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, failed)
	if err != nil {
		return
	}
	stamped := func(t time.Time, d *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(t, prometheus.MustNewConstMetric(d, vt, v, labels...))
	}
	if cpu := s.Node.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		stamped(cpu.Time.Time, nodeCPUDesc, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/float64(time.Second))
	}
	if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
		stamped(m.Time.Time, nodeMemoryDesc, prometheus.GaugeValue, float64(*m.WorkingSetBytes))
	}
	for _, p := range s.Pods {
		for _, ct := range p.Containers {
			l := []string{ct.Name, p.PodRef.Name, p.PodRef.Namespace}
			ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue, float64(ct.StartTime.UnixNano())/float64(time.Second), l...)
			if cpu := ct.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				stamped(cpu.Time.Time, containerCPUDesc, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/float64(time.Second), l...)
			}
			if m := ct.Memory; m != nil && m.WorkingSetBytes != nil {
				stamped(m.Time.Time, containerMemoryDesc, prometheus.GaugeValue, float64(*m.WorkingSetBytes), l...)
			}
		}
		if cpu := p.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
			stamped(cpu.Time.Time, podCPUDesc, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/float64(time.Second), p.PodRef.Name, p.PodRef.Namespace)
		}
		if m := p.Memory; m != nil && m.WorkingSetBytes != nil {
			stamped(m.Time.Time, podMemoryDesc, prometheus.GaugeValue, float64(*m.WorkingSetBytes), p.PodRef.Name, p.PodRef.Namespace)
		}
	}
}

// cAdvisor's container series (/metrics/cadvisor), for the containers of pods: the
// labels cAdvisor's kubelet endpoint gives them (container "" is the pod as a whole).
var (
	cadvisorLabels        = []string{"container", "namespace", "pod"}
	cadvisorNetworkLabels = []string{"container", "interface", "namespace", "pod"}
	cadvisorCPUDesc       = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed in seconds.", cadvisorLabels, nil)
	cadvisorWorkingSetDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set in bytes.", cadvisorLabels, nil)
	cadvisorMemoryUsageDesc = prometheus.NewDesc("container_memory_usage_bytes",
		"Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels, nil)
	cadvisorRSSDesc = prometheus.NewDesc("container_memory_rss",
		"Size of RSS in bytes.", cadvisorLabels, nil)
	cadvisorFsUsageDesc = prometheus.NewDesc("container_fs_usage_bytes",
		"Number of bytes that are consumed by the container on this filesystem.", cadvisorLabels, nil)
	cadvisorStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds.", cadvisorLabels, nil)
	cadvisorRxDesc = prometheus.NewDesc("container_network_receive_bytes_total",
		"Cumulative count of bytes received", cadvisorNetworkLabels, nil)
	cadvisorTxDesc = prometheus.NewDesc("container_network_transmit_bytes_total",
		"Cumulative count of bytes transmitted", cadvisorNetworkLabels, nil)
	cadvisorRxErrDesc = prometheus.NewDesc("container_network_receive_errors_total",
		"Cumulative count of errors encountered while receiving", cadvisorNetworkLabels, nil)
	cadvisorTxErrDesc = prometheus.NewDesc("container_network_transmit_errors_total",
		"Cumulative count of errors encountered while transmitting", cadvisorNetworkLabels, nil)
)

// NewCadvisorCollector is cAdvisor-shaped container metrics (/metrics/cadvisor) over
// summary.
func NewCadvisorCollector(summary SummaryFunc) prometheus.Collector {
	return cadvisorCollector{summary}
}

type cadvisorCollector struct{ summary SummaryFunc }

var _ prometheus.Collector = cadvisorCollector{}

func (cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cadvisorCPUDesc, cadvisorWorkingSetDesc, cadvisorMemoryUsageDesc, cadvisorRSSDesc, cadvisorFsUsageDesc, cadvisorStartDesc, cadvisorRxDesc, cadvisorTxDesc, cadvisorRxErrDesc, cadvisorTxErrDesc} {
		ch <- d
	}
}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s, err := c.summary(ctx, false)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(cadvisorCPUDesc, err)
		return
	}
	gauge := func(d *prometheus.Desc, v *uint64, labels ...string) {
		if v != nil {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*v), labels...)
		}
	}
	for _, p := range s.Pods {
		ns, pod := p.PodRef.Namespace, p.PodRef.Name
		for _, ct := range p.Containers {
			ch <- prometheus.MustNewConstMetric(cadvisorStartDesc, prometheus.GaugeValue, float64(ct.StartTime.Unix()), ct.Name, ns, pod)
			if ct.CPU != nil && ct.CPU.UsageCoreNanoSeconds != nil {
				ch <- prometheus.MustNewConstMetric(cadvisorCPUDesc, prometheus.CounterValue, float64(*ct.CPU.UsageCoreNanoSeconds)/float64(time.Second), ct.Name, ns, pod)
			}
			if m := ct.Memory; m != nil {
				gauge(cadvisorWorkingSetDesc, m.WorkingSetBytes, ct.Name, ns, pod)
				gauge(cadvisorMemoryUsageDesc, m.UsageBytes, ct.Name, ns, pod)
				gauge(cadvisorRSSDesc, m.RSSBytes, ct.Name, ns, pod)
			}
			if ct.Rootfs != nil {
				gauge(cadvisorFsUsageDesc, ct.Rootfs.UsedBytes, ct.Name, ns, pod)
			}
		}
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			ch <- prometheus.MustNewConstMetric(cadvisorCPUDesc, prometheus.CounterValue, float64(*p.CPU.UsageCoreNanoSeconds)/float64(time.Second), "", ns, pod)
		}
		if m := p.Memory; m != nil {
			gauge(cadvisorWorkingSetDesc, m.WorkingSetBytes, "", ns, pod)
			gauge(cadvisorMemoryUsageDesc, m.UsageBytes, "", ns, pod)
		}
		if n := p.Network; n != nil {
			for _, i := range n.Interfaces {
				l := []string{"", i.Name, ns, pod}
				counter := func(d *prometheus.Desc, v *uint64) {
					if v != nil {
						ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*v), l...)
					}
				}
				counter(cadvisorRxDesc, i.RxBytes)
				counter(cadvisorTxDesc, i.TxBytes)
				counter(cadvisorRxErrDesc, i.RxErrors)
				counter(cadvisorTxErrDesc, i.TxErrors)
			}
		}
	}
}
