package eviction

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Signal is an eviction signal's name, as --eviction-hard spells it.
type Signal string

// The signals the agent observes.
const (
	MemoryAvailable   Signal = "memory.available"
	NodeFsAvailable   Signal = "nodefs.available"
	NodeFsInodesFree  Signal = "nodefs.inodesFree"
	ImageFsAvailable  Signal = "imagefs.available"
	ImageFsInodesFree Signal = "imagefs.inodesFree"
)

// DefaultHard is the kubelet's --eviction-hard default on Linux.
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%"

// resourceOf is the resource each signal reclaims (what eviction messages name).
var resourceOf = map[Signal]corev1.ResourceName{
	MemoryAvailable:   corev1.ResourceMemory,
	NodeFsAvailable:   corev1.ResourceEphemeralStorage,
	NodeFsInodesFree:  "inodes",
	ImageFsAvailable:  corev1.ResourceEphemeralStorage,
	ImageFsInodesFree: "inodes",
}

// Threshold is one hard eviction threshold: the signal is met when its available amount
// is below Quantity, or below Percentage of its capacity.
type Threshold struct {
	Signal     Signal
	Quantity   *resource.Quantity
	Percentage float64
}

// String is the threshold in --eviction-hard syntax.
func (t Threshold) String() string {
	if t.Quantity != nil {
		return string(t.Signal) + "<" + t.Quantity.String()
	}
	return string(t.Signal) + "<" + strconv.FormatFloat(t.Percentage*100, 'f', -1, 64) + "%"
}

// ParseThresholds reads --eviction-hard: comma-separated signal<quantity or
// signal<percentage%, each signal at most once (an empty string: none). Pure.
func ParseThresholds(s string) ([]Threshold, error) {
	var out []Threshold
	seen := map[Signal]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "<")
		if !ok {
			return nil, fmt.Errorf("--eviction-hard %q: want signal<quantity, e.g. memory.available<100Mi (only < is supported)", part)
		}
		sig := Signal(strings.TrimSpace(name))
		if _, known := resourceOf[sig]; !known {
			return nil, fmt.Errorf("--eviction-hard %q: unknown signal %q (memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree)", part, sig)
		}
		if seen[sig] {
			return nil, fmt.Errorf("--eviction-hard: signal %s given twice", sig)
		}
		seen[sig] = true
		value = strings.TrimSpace(value)
		t := Threshold{Signal: sig}
		if pct, ok := strings.CutSuffix(value, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil || f < 0 || f > 100 {
				return nil, fmt.Errorf("--eviction-hard %q: %q is not a percentage between 0%% and 100%%", part, value)
			}
			t.Percentage = f / 100
		} else {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return nil, fmt.Errorf("--eviction-hard %q: %w", part, err)
			}
			if q.Sign() < 0 {
				return nil, fmt.Errorf("--eviction-hard %q: negative quantity", part)
			}
			t.Quantity = &q
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Signal < out[j].Signal })
	return out, nil
}

// Observation is a signal's available amount and its capacity.
type Observation struct {
	Available, Capacity resource.Quantity
}

// Observe reads each signal's observation from a Summary. Pure.
func Observe(s *statsapi.Summary) map[Signal]Observation {
	out := map[Signal]Observation{}
	q := func(v *uint64) resource.Quantity { return *resource.NewQuantity(int64(*v), resource.BinarySI) }
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[MemoryAvailable] = Observation{Available: q(m.AvailableBytes), Capacity: *resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI)}
	}
	fs := func(f *statsapi.FsStats, bytes, inodes Signal) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[bytes] = Observation{Available: q(f.AvailableBytes), Capacity: q(f.CapacityBytes)}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			out[inodes] = Observation{Available: *resource.NewQuantity(int64(*f.InodesFree), resource.DecimalSI), Capacity: *resource.NewQuantity(int64(*f.Inodes), resource.DecimalSI)}
		}
	}
	fs(s.Node.Fs, NodeFsAvailable, NodeFsInodesFree)
	if s.Node.Runtime != nil {
		fs(s.Node.Runtime.ImageFs, ImageFsAvailable, ImageFsInodesFree)
	}
	return out
}

// QuantityOf is the threshold's amount against capacity. Pure.
func (t Threshold) QuantityOf(capacity resource.Quantity) resource.Quantity {
	if t.Quantity != nil {
		return *t.Quantity
	}
	return *resource.NewQuantity(int64(float64(capacity.Value())*t.Percentage), capacity.Format)
}

// Met are the thresholds whose signal is below them. Pure.
func Met(thresholds []Threshold, obs map[Signal]Observation) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		want := t.QuantityOf(o.Capacity)
		if o.Available.Cmp(want) < 0 {
			out = append(out, t)
		}
	}
	return out
}

// Pressure is the node's pressure conditions.
type Pressure struct{ Memory, Disk bool }

// PressureOf is the conditions the met thresholds raise. Pure.
func PressureOf(met []Threshold) Pressure {
	var p Pressure
	for _, t := range met {
		if t.Signal == MemoryAvailable {
			p.Memory = true
		} else {
			p.Disk = true
		}
	}
	return p
}
