package agent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestPVCVolumeStats: a pod whose claim the local-path provisioner satisfied (a directory
// under the agent's data dir) writes 3 MiB into it; the agent's /stats/summary reports the
// volume with pvcRef {claim, namespace} and the 3 MiB used (within the minute a claim's
// usage is reused), and its /metrics has the
// kubelet's kubelet_volume_stats_* gauges for the claim — both read through the API
// server's nodes/proxy, as monitoring reaches them.
func TestPVCVolumeStats(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 4*time.Minute)
	class := "local-path"
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "www"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Scheduled (not bound by hand), so that the claim is provisioned for the pod's node.
	pod := busyboxPod("writer", "", "dd if=/dev/zero of=/data/f bs=1M count=3 && sync && exec sleep 100000")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: nodeName}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "www"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "writer", 3*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	k := newKubectl(t, "1.33")
	base := "/api/v1/nodes/" + nodeName + "/proxy"
	// A claim's usage is measured at most once a minute (the kubelet's volumeStatsAggPeriod):
	// a measurement made while dd wrote stands for up to a minute.
	servertest.Eventually(t, 150*time.Second, time.Second, func() error {
		out, errOut, err := k.run("get", "--raw", base+"/stats/summary")
		if err != nil {
			return fmt.Errorf("get --raw stats/summary: %v %s", err, errOut)
		}
		var sum statsapi.Summary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			return err
		}
		for _, p := range sum.Pods {
			if p.PodRef.Namespace != ns || p.PodRef.Name != "writer" {
				continue
			}
			for _, v := range p.VolumeStats {
				if v.Name != "data" {
					continue
				}
				if v.PVCRef == nil || *v.PVCRef != (statsapi.PVCReference{Name: "www", Namespace: ns}) {
					return fmt.Errorf("volume data: pvcRef %+v", v.PVCRef)
				}
				if v.UsedBytes == nil || *v.UsedBytes < 3<<20 || v.CapacityBytes == nil || *v.CapacityBytes < *v.UsedBytes ||
					v.AvailableBytes == nil || v.Inodes == nil || v.InodesFree == nil || v.InodesUsed == nil || *v.InodesUsed < 1 {
					return fmt.Errorf("volume data with 3 MiB written: %+v", v.FsStats)
				}
				return nil
			}
			return fmt.Errorf("pod writer's volumes: %+v", p.VolumeStats)
		}
		return fmt.Errorf("no pod %s/writer in the summary", ns)
	})
	labels := map[string]string{"namespace": ns, "persistentvolumeclaim": "www"}
	servertest.Eventually(t, 30*time.Second, time.Second, func() error {
		out, errOut, err := k.run("get", "--raw", base+"/metrics")
		if err != nil {
			return fmt.Errorf("get --raw metrics: %v %s", err, errOut)
		}
		if v, ok := series(out, "kubelet_volume_stats_used_bytes", labels); !ok || v < 3<<20 {
			return fmt.Errorf("kubelet_volume_stats_used_bytes %v (present %v)", v, ok)
		}
		capacity, _ := series(out, "kubelet_volume_stats_capacity_bytes", labels)
		available, _ := series(out, "kubelet_volume_stats_available_bytes", labels)
		inodes, _ := series(out, "kubelet_volume_stats_inodes", labels)
		free, okFree := series(out, "kubelet_volume_stats_inodes_free", labels)
		used, _ := series(out, "kubelet_volume_stats_inodes_used", labels)
		if capacity < 3<<20 || available <= 0 || available > capacity || inodes <= 0 || !okFree || free > inodes || used < 1 {
			return fmt.Errorf("claim gauges: capacity %v available %v inodes %v free %v used %v", capacity, available, inodes, free, used)
		}
		return nil
	})
}
