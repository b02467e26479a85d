package agent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOOMKilled: a container's requests and limits reach its cgroup (memory limit, CFS
// quota, cpu shares on cgroup v1, as the kubelet computes them), and a container that
// allocates past its memory limit is killed by the kernel and reported terminated with
// reason OOMKilled.
func TestOOMKilled(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	// The limits as the container sees them (cgroup v1 files, or v2's), then a shell
	// variable far past the limit.
	script := `cd /sys/fs/cgroup
for f in memory/memory.limit_in_bytes memory.max cpu/cpu.cfs_quota_us cpu.max cpu/cpu.shares; do [ -f $f ] && echo "$f=$(cat $f)"; done
echo allocating
x=$(head -c 200000000 /dev/zero | tr '\000' a)
echo survived ${#x}`
	p := busyboxPod("oom", nodeName, script)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("20Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("20Mi")},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, ns, "oom", 90*time.Second, "terminal", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
	})
	raw, err := cs.CoreV1().Pods(ns).GetLogs("oom", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	s := got.Status.ContainerStatuses[0].State.Terminated
	if got.Status.Phase != corev1.PodFailed || s == nil || s.Reason != "OOMKilled" {
		t.Errorf("phase %s, state %+v, want Failed and terminated OOMKilled; log:\n%s", got.Status.Phase, got.Status.ContainerStatuses[0].State, log)
	}
	if got.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("QoS class %s, want Burstable", got.Status.QOSClass)
	}
	want := []string{"=20971520", "20000"} // 20Mi; 200m of a 100 ms period
	if strings.Contains(log, "cpu/cpu.shares=") {
		want = append(want, "cpu/cpu.shares=102") // 100m × 1024 / 1000
	}
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("the container's cgroup has no %q: %s", w, log)
		}
	}
	if !strings.Contains(log, "allocating") {
		t.Errorf("the container never got to allocate: %q", log)
	}
}
