package cgroups

import (
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func TestForPod(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	c := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	for _, tc := range []struct {
		name string
		init []corev1.Container
		cs   []corev1.Container
		want Config
		qos  string
	}{
		{"best effort", nil, []corev1.Container{c(nil, nil)}, Config{CPUShares: 2}, "besteffort"},
		{"guaranteed", nil, []corev1.Container{c(rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi"))},
			Config{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20}, ""},
		{"burstable, one container without limits", nil,
			[]corev1.Container{c(rl("cpu", "100m"), rl("cpu", "200m", "memory", "32Mi")), c(rl("cpu", "250m"), nil)},
			Config{CPUShares: 358}, "burstable"},
		{"burstable, limits on all: summed", nil,
			[]corev1.Container{c(rl("cpu", "100m"), rl("cpu", "200m", "memory", "32Mi")), c(rl("cpu", "100m"), rl("cpu", "300m", "memory", "32Mi"))},
			Config{CPUShares: 204, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20}, "burstable"},
		{"init container's larger request counts", []corev1.Container{c(rl("cpu", "1"), nil)},
			[]corev1.Container{c(rl("cpu", "100m"), nil)}, Config{CPUShares: 1024}, "burstable"},
		{"tiny request: minimum shares and quota", nil, []corev1.Container{c(rl("cpu", "1m"), rl("cpu", "1m"))},
			Config{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000}, "burstable"},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.cs}}
		if got := ForPod(pod); got != tc.want {
			t.Errorf("%s: ForPod = %+v, want %+v", tc.name, got, tc.want)
		}
		if got := QOSDir(pod); got != tc.qos {
			t.Errorf("%s: QOSDir = %q, want %q", tc.name, got, tc.qos)
		}
	}
}

func TestWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{2: 1, 1024: 39, 262144: 10000} {
		if got := Weight(shares); got != want {
			t.Errorf("Weight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestHierarchyV1(t *testing.T) {
	// A directory standing in for a v1 mount: the files are plain files here.
	mnt := t.TempDir()
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "blkio"} {
		if err := mkdir(mnt + "/" + c); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(mnt, "/kube-x")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.EnsureNode(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, mnt+"/cpu/kube-x/kubepods/cpu.shares"); got != "2048" {
		t.Errorf("kubepods cpu.shares = %q", got)
	}
	if got := read(t, mnt+"/memory/kube-x/kubepods/memory.limit_in_bytes"); got != "1073741824" {
		t.Errorf("kubepods memory limit = %q", got)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	pod.UID = "u1"
	name, err := h.EnsurePod(pod)
	if err != nil || name != "/kube-x/kubepods/besteffort/podu1" {
		t.Fatalf("EnsurePod = %q, %v", name, err)
	}
	if got := read(t, mnt+"/cpu/kube-x/kubepods/besteffort/podu1/cpu.shares"); got != "2" {
		t.Errorf("pod cpu.shares = %q", got)
	}
	// PodUIDs: every pod directory once, whatever its QoS class and controller; other
	// directories are not pods.
	burst := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	burst.UID = "u2"
	if _, err := h.EnsurePod(burst); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/blkio/kube-x/kubepods/pod", "/cpu/kube-x/kubepods/other", "/blkio/kube-x/kubepods/podu3"} {
		if err := mkdir(mnt + d); err != nil {
			t.Fatal(err)
		}
	}
	got := h.PodUIDs()
	slices.Sort(got)
	if want := []types.UID{"u1", "u2", "u3"}; !slices.Equal(got, want) {
		t.Errorf("PodUIDs = %v, want %v", got, want)
	}
}

func mkdir(p string) error { return os.MkdirAll(p, 0o755) }

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
