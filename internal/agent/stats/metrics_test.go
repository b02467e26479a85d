package stats

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedSummary is a node with two pods: web (two containers, network, an emptyDir and a
// PVC-backed volume) and db (one container, the same claim as web, and another claim).
func fixedSummary() *statsapi.Summary {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	u := func(v uint64) *uint64 { return &v }
	cpu := func(ns uint64) *statsapi.CPUStats { return &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u(ns)} }
	mem := func(ws uint64) *statsapi.MemoryStats {
		return &statsapi.MemoryStats{Time: at, WorkingSetBytes: u(ws), UsageBytes: u(ws + 100), RSSBytes: u(ws / 2)}
	}
	fs := func(used uint64) statsapi.FsStats {
		return statsapi.FsStats{Time: at, CapacityBytes: u(1 << 30), AvailableBytes: u(1<<29 - used), UsedBytes: u(used), Inodes: u(1000), InodesFree: u(900), InodesUsed: u(7)}
	}
	start := metav1.NewTime(time.Unix(1699999000, 500000000))
	claim := &statsapi.PVCReference{Name: "data", Namespace: "shop"}
	return &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", CPU: cpu(5e9), Memory: mem(1 << 30)},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "shop", UID: "u1"}, StartTime: start,
			Containers: []statsapi.ContainerStats{
				{Name: "app", StartTime: start, CPU: cpu(2e9), Memory: mem(4096), Rootfs: &statsapi.FsStats{UsedBytes: u(8192)}},
				{Name: "side", StartTime: start, CPU: cpu(1e9), Memory: mem(2048)},
			},
			CPU: cpu(3e9), Memory: mem(6144),
			Network: &statsapi.NetworkStats{InterfaceStats: statsapi.InterfaceStats{Name: "eth0"}, Interfaces: []statsapi.InterfaceStats{
				{Name: "eth0", RxBytes: u(10), TxBytes: u(20), RxErrors: u(1), TxErrors: u(2)}}},
			VolumeStats: []statsapi.VolumeStats{{Name: "cache", FsStats: fs(1)}, {Name: "data", FsStats: fs(4096), PVCRef: claim}},
		}, {
			PodRef: statsapi.PodReference{Name: "db", Namespace: "shop", UID: "u2"}, StartTime: start,
			Containers: []statsapi.ContainerStats{{Name: "pg", StartTime: start, CPU: cpu(7e8)}},
			CPU:        cpu(7e8),
			VolumeStats: []statsapi.VolumeStats{{Name: "data", FsStats: fs(4096), PVCRef: claim},
				{Name: "wal", FsStats: fs(512), PVCRef: &statsapi.PVCReference{Name: "wal", Namespace: "shop"}}},
		}},
	}
}

// exposition is what a registry of c serves, in the Prometheus text format.
func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestCollectors: every series of /metrics/resource, /metrics/cadvisor and the volume
// stats of /metrics from a fixed Summary, names, labels, values and timestamps, against
// testdata (the claim shop/data, mounted by two pods, appears once).
func TestCollectors(t *testing.T) {
	sum := func(context.Context, bool) (*statsapi.Summary, error) { return fixedSummary(), nil }
	golden(t, "resource.txt", exposition(t, NewResourceCollector(sum)))
	golden(t, "cadvisor.txt", exposition(t, NewCadvisorCollector(sum)))
	golden(t, "volume.txt", exposition(t, NewVolumeCollector(sum)))
}

// TestCollectorsOnError: a failed measurement is scrape_error 1 on /metrics/resource, a
// collection error on /metrics/cadvisor and no volume series.
func TestCollectorsOnError(t *testing.T) {
	fail := func(context.Context, bool) (*statsapi.Summary, error) { return nil, errors.New("runtime down") }
	if got := exposition(t, NewResourceCollector(fail)); got != "# HELP resource_scrape_error 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\nresource_scrape_error 1\n# HELP scrape_error 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE scrape_error gauge\nscrape_error 1\n" {
		t.Errorf("resource collector on error:\n%s", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCadvisorCollector(fail))
	if _, err := reg.Gather(); err == nil {
		t.Error("cadvisor collector on error: no gather error")
	}
	if got := exposition(t, NewVolumeCollector(fail)); got != "" {
		t.Errorf("volume collector on error:\n%s", got)
	}
}

// BenchmarkResourceScrape: one /metrics/resource collection of a node with 110 pods of two
// containers (the kubelet's default pod limit), encoded as metrics-server reads it.
func BenchmarkResourceScrape(b *testing.B) {
	base := fixedSummary()
	big := &statsapi.Summary{Node: base.Node}
	for i := range 110 {
		p := base.Pods[0]
		p.PodRef.Name = fmt.Sprintf("web-%d", i)
		big.Pods = append(big.Pods, p)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewResourceCollector(func(context.Context, bool) (*statsapi.Summary, error) { return big, nil }))
	b.ReportAllocs()
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
}
