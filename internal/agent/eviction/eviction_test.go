package eviction

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: DefaultHard, want: "imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"},
		{in: " memory.available < 1Gi ", want: "memory.available<1Gi"},
		{in: "", want: ""},
		{in: "nodefs.available<12.5%", want: "nodefs.available<12.5%"},
		{in: "memory.available>1Gi", err: "only < is supported"},
		{in: "cpu.available<1", err: `unknown signal "cpu.available"`},
		{in: "memory.available<1Gi,memory.available<2Gi", err: "given twice"},
		{in: "nodefs.available<150%", err: "between 0% and 100%"},
		{in: "memory.available<lots", err: "memory.available<lots"},
		{in: "memory.available<-1Mi", err: "negative"},
	} {
		got, err := ParseThresholds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseThresholds(%q): error %v, want one with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseThresholds(%q): %v", tc.in, err)
			continue
		}
		var s []string
		for _, th := range got {
			s = append(s, th.String())
		}
		if strings.Join(s, ",") != tc.want {
			t.Errorf("ParseThresholds(%q) = %s, want %s", tc.in, strings.Join(s, ","), tc.want)
		}
	}
}

func u(v uint64) *uint64 { return &v }

func TestMetAndPressure(t *testing.T) {
	th, err := ParseThresholds(DefaultHard)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(memAvail, fsAvail, fsInodesFree, imgAvail uint64) *statsapi.Summary {
		return &statsapi.Summary{Node: statsapi.NodeStats{
			Memory:  &statsapi.MemoryStats{AvailableBytes: u(memAvail), WorkingSetBytes: u(8<<30 - memAvail)},
			Fs:      &statsapi.FsStats{AvailableBytes: u(fsAvail), CapacityBytes: u(100 << 30), InodesFree: u(fsInodesFree), Inodes: u(1000)},
			Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{AvailableBytes: u(imgAvail), CapacityBytes: u(100 << 30), InodesFree: u(1000), Inodes: u(1000)}},
		}}
	}
	for _, tc := range []struct {
		name string
		s    *statsapi.Summary
		met  string
		want Pressure
	}{
		{"healthy", sum(1<<30, 50<<30, 900, 50<<30), "", Pressure{}},
		{"memory", sum(50<<20, 50<<30, 900, 50<<30), "memory.available<100Mi", Pressure{Memory: true}},
		{"nodefs bytes", sum(1<<30, 9<<30, 900, 50<<30), "nodefs.available<10%", Pressure{Disk: true}},
		{"nodefs inodes", sum(1<<30, 50<<30, 40, 50<<30), "nodefs.inodesFree<5%", Pressure{Disk: true}},
		{"imagefs", sum(1<<30, 50<<30, 900, 10<<30), "imagefs.available<15%", Pressure{Disk: true}},
		{"both", sum(1<<20, 1<<30, 900, 50<<30), "memory.available<100Mi,nodefs.available<10%", Pressure{Memory: true, Disk: true}},
		{"no stats", &statsapi.Summary{}, "", Pressure{}},
	} {
		met := Met(th, Observe(tc.s))
		var s []string
		for _, m := range met {
			s = append(s, m.String())
		}
		if strings.Join(s, ",") != tc.met || PressureOf(met) != tc.want {
			t.Errorf("%s: met %v, pressure %+v; want %s, %+v", tc.name, s, PressureOf(met), tc.met, tc.want)
		}
	}
}

func pod(name string, prio int32, memRequest string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{Priority: ptr.To(prio), Containers: []corev1.Container{{Name: "c"}}}}
	if memRequest != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memRequest)}
	}
	return p
}

func memStats(name string, ws uint64) *statsapi.PodStats {
	return &statsapi.PodStats{PodRef: statsapi.PodReference{Name: name, UID: name}, Memory: &statsapi.MemoryStats{WorkingSetBytes: u(ws)},
		Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(ws)}}}}
}

func TestRankMemory(t *testing.T) {
	pods := []*corev1.Pod{
		pod("within-low", 0, "100Mi"),    // 50Mi used: within its request
		pod("over-high", 1000, "10Mi"),   // 20Mi used: over, high priority
		pod("over-low-small", 0, "10Mi"), // 20Mi used: over by 10Mi
		pod("over-low-big", 0, ""),       // 200Mi used: over by 200Mi (BestEffort)
		pod("within-lowest", -10, "1Gi"), // 10Mi used: within, lowest priority
	}
	stats := map[types.UID]*statsapi.PodStats{
		"within-low": memStats("within-low", 50<<20), "over-high": memStats("over-high", 20<<20),
		"over-low-small": memStats("over-low-small", 20<<20), "over-low-big": memStats("over-low-big", 200<<20),
		"within-lowest": memStats("within-lowest", 10<<20),
	}
	var got []string
	for _, p := range Rank(pods, stats, corev1.ResourceMemory) {
		got = append(got, p.Name)
	}
	want := "over-low-big,over-low-small,over-high,within-lowest,within-low"
	if strings.Join(got, ",") != want {
		t.Errorf("Rank = %s, want %s", strings.Join(got, ","), want)
	}
}

func TestMessage(t *testing.T) {
	p := pod("p", 0, "10Mi")
	got := Message(corev1.ResourceMemory, p, memStats("p", 20<<20), resource.MustParse("100Mi"), resource.MustParse("50Mi"))
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 20Mi, request is 10Mi, has larger consumption of memory. "
	if got != want {
		t.Errorf("Message =\n%q, want\n%q", got, want)
	}
}

func TestLocalStorageViolation(t *testing.T) {
	limit := resource.MustParse("4Mi")
	withDir := func(medium corev1.StorageMedium) *corev1.Pod {
		p := pod("p", 0, "")
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium, SizeLimit: &limit}}}}
		return p
	}
	withLimit := func() *corev1.Pod {
		p := pod("p", 0, "")
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d"})
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: limit}
		p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: limit}
		return p
	}
	fs := func(v uint64) *statsapi.FsStats { return &statsapi.FsStats{UsedBytes: u(v)} }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		ps   *statsapi.PodStats
		want string
	}{
		{"emptyDir over", withDir(""), &statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "data", FsStats: *fs(5 << 20)}}}, `Usage of EmptyDir volume "data" exceeds the limit "4Mi". `},
		{"emptyDir within", withDir(""), &statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "data", FsStats: *fs(3 << 20)}}}, ""},
		{"memory emptyDir is the kernel's", withDir(corev1.StorageMediumMemory), &statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "data", FsStats: *fs(5 << 20)}}}, ""},
		{"pod total over", withLimit(), &statsapi.PodStats{EphemeralStorage: fs(9 << 20)}, "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. "},
		{"container over", withLimit(), &statsapi.PodStats{EphemeralStorage: fs(6 << 20), Containers: []statsapi.ContainerStats{
			{Name: "c", Rootfs: fs(5 << 20), Logs: fs(0)}, {Name: "d", Rootfs: fs(1 << 20), Logs: fs(0)}}}, `Container c exceeded its local ephemeral storage limit "4Mi". `},
		{"within", withLimit(), &statsapi.PodStats{EphemeralStorage: fs(6 << 20), Containers: []statsapi.ContainerStats{
			{Name: "c", Rootfs: fs(3 << 20), Logs: fs(0)}, {Name: "d", Rootfs: fs(3 << 20), Logs: fs(0)}}}, ""},
		{"no stats", withLimit(), nil, ""},
	} {
		if got := LocalStorageViolation(tc.pod, tc.ps); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
