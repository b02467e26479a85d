package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestPodCgroups: each pod runs in its cgroup of the kubelet's QoS hierarchy —
// <root>/kubepods/pod<uid> (Guaranteed), kubepods/burstable/pod<uid>,
// kubepods/besteffort/pod<uid> — with the pod's CPU request as cpu.shares and its limits
// as CFS quota and memory limit; the container's processes are inside it, and the pod's
// cgroup is removed once the pod is deleted; an orphan pod cgroup (no pod, no sandbox) is
// removed by the housekeeping while live pods keep theirs.
func TestPodCgroups(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	type want struct {
		qos                corev1.PodQOSClass
		dir                string
		shares, quota, mem string
	}
	cases := map[string]struct {
		res  corev1.ResourceRequirements
		want want
	}{
		"guaranteed": {corev1.ResourceRequirements{Requests: rl("250m", "32Mi"), Limits: rl("250m", "32Mi")},
			want{corev1.PodQOSGuaranteed, "kubepods", "256", "25000", "33554432"}},
		"burstable": {corev1.ResourceRequirements{Requests: rl("100m", "16Mi")},
			want{corev1.PodQOSBurstable, "kubepods/burstable", "102", "-1", ""}},
		"besteffort": {corev1.ResourceRequirements{},
			want{corev1.PodQOSBestEffort, "kubepods/besteffort", "2", "-1", ""}},
	}
	for name, c := range cases {
		p := busyboxPod(name, nodeName, "cat /proc/self/cgroup; sleep 3600")
		p.Spec.Containers[0].Resources = c.res
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v1 := true
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		v1 = false
	}
	for name, c := range cases {
		p := waitPod(t, cs, ns, name, 90*time.Second, "Ready", podReady)
		if p.Status.QOSClass != c.want.qos {
			t.Errorf("%s: QoS %s, want %s", name, p.Status.QOSClass, c.want.qos)
		}
		podDir := filepath.Join(cgroupRoot, c.want.dir, "pod"+string(p.UID))
		// The container's own view of its cgroups names the pod's cgroup.
		var log string
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			raw, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			if log = string(raw); !strings.Contains(log, podDir+"/") {
				return fmt.Errorf("%s: /proc/self/cgroup does not name %s:\n%s", name, podDir, log)
			}
			return nil
		})
		if !v1 {
			continue
		}
		files := map[string]string{"cpu/" + podDir + "/cpu.shares": c.want.shares, "cpu/" + podDir + "/cpu.cfs_quota_us": c.want.quota}
		if c.want.mem != "" {
			files["memory/"+podDir+"/memory.limit_in_bytes"] = c.want.mem
		}
		for f, v := range files {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", f))
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else if got := strings.TrimSpace(string(b)); got != v {
				t.Errorf("%s: %s = %s, want %s", name, f, got, v)
			}
		}
	}
	if v1 {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cgroupRoot, "kubepods/besteffort/cpu.shares"))
		if err != nil || strings.TrimSpace(string(b)) != "2" {
			t.Errorf("besteffort cpu.shares: %q, %v", b, err)
		}
	}
	// Deleted: the pod's cgroup goes with its sandbox.
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "burstable", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "burstable", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("/sys/fs/cgroup", "memory", cgroupRoot, "kubepods/burstable", "pod"+string(p.UID))
	if !v1 {
		dir = filepath.Join("/sys/fs/cgroup", cgroupRoot, "kubepods/burstable", "pod"+string(p.UID))
	}
	servertest.Eventually(t, 60*time.Second, 250*time.Millisecond, func() error {
		if _, err := os.Stat(dir); err == nil {
			return fmt.Errorf("%s still there after the pod's deletion", dir)
		}
		return nil
	})
	// An orphan: a pod cgroup no sandbox, pod or worker accounts for (as a crash between a
	// teardown and the cgroup's removal leaves) goes at the agent's next housekeeping.
	orphan := filepath.Join(cgroupRoot, "kubepods/besteffort/pod"+string(uuid.NewUUID()))
	var orphanDirs []string
	if v1 {
		for _, ctrl := range []string{"cpu", "memory"} {
			orphanDirs = append(orphanDirs, filepath.Join("/sys/fs/cgroup", ctrl, orphan))
		}
	} else {
		orphanDirs = append(orphanDirs, filepath.Join("/sys/fs/cgroup", orphan))
	}
	for _, d := range orphanDirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, 60*time.Second, 250*time.Millisecond, func() error {
		for _, d := range orphanDirs {
			if _, err := os.Stat(d); err == nil {
				return fmt.Errorf("orphan pod cgroup %s still there", d)
			}
		}
		return nil
	})
	// The live pods' cgroups stay.
	for _, name := range []string{"guaranteed", "besteffort"} {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join("/sys/fs/cgroup", "memory", cgroupRoot, cases[name].want.dir, "pod"+string(p.UID))
		if !v1 {
			d = filepath.Join("/sys/fs/cgroup", cgroupRoot, cases[name].want.dir, "pod"+string(p.UID))
		}
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: the live pod's cgroup: %v", name, err)
		}
	}
}
