package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"kubeos.dev/kube/internal/server/servertest"
)

// series is the value of the first sample of metric name in Prometheus text whose labels
// include every one of labels (ok false: none).
func series(text, name string, labels map[string]string) (float64, bool) {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		lbls, value := "", rest
		if rest[0] == '{' {
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			lbls, value = rest[1:end], rest[end+1:]
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(","+lbls+",", ","+k+"="+strconv.Quote(v)+",") {
				match = false
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(value)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return v, true
	}
	return 0, false
}

// TestNodeStatsThroughProxy: with a pod that burned some CPU and wrote 2 MiB into an
// emptyDir, the agent's /metrics/resource (through the API server's nodes/proxy, as
// `kubectl get --raw` and metrics-server reach it) has the kubelet's series for the pod
// with plausible values, /stats/summary has its CPU, memory, network, volume and
// ephemeral-storage figures, /metrics/cadvisor and /metrics answer, and a caller without
// nodes/stats is refused by the agent itself.
func TestNodeStatsThroughProxy(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	pod := busyboxPod("busy", nodeName, "dd if=/dev/zero of=/data/f bs=1M count=2; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo done; exec sleep 100000")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "busy", 90*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	k := newKubectl(t, "1.33")
	base := "/api/v1/nodes/" + nodeName + "/proxy"
	labels := map[string]string{"container": "main", "pod": "busy", "namespace": ns}
	servertest.Eventually(t, 60*time.Second, time.Second, func() error {
		out, errOut, err := k.run("get", "--raw", base+"/metrics/resource")
		if err != nil {
			return fmt.Errorf("get --raw metrics/resource: %v %s", err, errOut)
		}
		if v, ok := series(out, "scrape_error", nil); !ok || v != 0 {
			return fmt.Errorf("scrape_error %v (present %v):\n%s", v, ok, out)
		}
		// The loop in the pod spends well over 10 ms of CPU; a busybox shell's working set
		// is some hundreds of KiB, far below 1 GiB.
		if v, ok := series(out, "container_cpu_usage_seconds_total", labels); !ok || v < 0.01 {
			return fmt.Errorf("container_cpu_usage_seconds_total of the pod %v (present %v):\n%s", v, ok, out)
		}
		if v, ok := series(out, "container_memory_working_set_bytes", labels); !ok || v <= 0 || v > 1<<30 {
			return fmt.Errorf("container_memory_working_set_bytes of the pod %v (present %v)", v, ok)
		}
		if v, ok := series(out, "pod_cpu_usage_seconds_total", map[string]string{"pod": "busy", "namespace": ns}); !ok || v < 0.01 {
			return fmt.Errorf("pod_cpu_usage_seconds_total %v (present %v)", v, ok)
		}
		if v, ok := series(out, "container_start_time_seconds", labels); !ok || v < float64(time.Now().Add(-time.Hour).Unix()) {
			return fmt.Errorf("container_start_time_seconds %v (present %v)", v, ok)
		}
		if v, ok := series(out, "node_cpu_usage_seconds_total", nil); !ok || v <= 0 {
			return fmt.Errorf("node_cpu_usage_seconds_total %v (present %v)", v, ok)
		}
		if v, ok := series(out, "node_memory_working_set_bytes", nil); !ok || v <= 0 {
			return fmt.Errorf("node_memory_working_set_bytes %v (present %v)", v, ok)
		}
		return nil
	})

	var podStats *statsapi.PodStats
	var sum statsapi.Summary
	servertest.Eventually(t, 60*time.Second, time.Second, func() error {
		out, errOut, err := k.run("get", "--raw", base+"/stats/summary")
		if err != nil {
			return fmt.Errorf("get --raw stats/summary: %v %s", err, errOut)
		}
		sum = statsapi.Summary{}
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			return fmt.Errorf("summary: %v\n%s", err, out)
		}
		podStats = nil
		for i := range sum.Pods {
			if p := sum.Pods[i].PodRef; p.Namespace == ns && p.Name == "busy" {
				podStats = &sum.Pods[i]
			}
		}
		if podStats == nil {
			return fmt.Errorf("summary has no pod %s/busy: %s", ns, out)
		}
		var vol *statsapi.VolumeStats
		for i := range podStats.VolumeStats {
			if podStats.VolumeStats[i].Name == "data" {
				vol = &podStats.VolumeStats[i]
			}
		}
		if vol == nil || vol.UsedBytes == nil || *vol.UsedBytes < 2<<20 {
			return fmt.Errorf("volume stats of the emptyDir with 2 MiB written: %+v", podStats.VolumeStats)
		}
		if e := podStats.EphemeralStorage; e == nil || e.UsedBytes == nil || *e.UsedBytes < 2<<20 {
			return fmt.Errorf("pod ephemeral-storage %+v, want at least the emptyDir's 2 MiB", e)
		}
		return nil
	})
	if c := podStats.CPU; c == nil || c.UsageCoreNanoSeconds == nil || *c.UsageCoreNanoSeconds < 1e7 {
		t.Errorf("pod cpu %+v", c)
	}
	if m := podStats.Memory; m == nil || m.WorkingSetBytes == nil || *m.WorkingSetBytes == 0 {
		t.Errorf("pod memory %+v", m)
	}
	if n := podStats.Network; n == nil || n.Name != "eth0" || n.RxBytes == nil {
		t.Errorf("pod network %+v, want eth0's counters", n)
	}
	if len(podStats.Containers) != 1 || podStats.Containers[0].Name != "main" || podStats.Containers[0].Logs == nil || podStats.Containers[0].Rootfs == nil {
		t.Errorf("pod containers %+v", podStats.Containers)
	}
	if n := sum.Node; n.NodeName != nodeName || n.CPU == nil || n.Memory == nil || n.Memory.AvailableBytes == nil || n.Fs == nil || n.Fs.CapacityBytes == nil || n.Runtime == nil || n.Runtime.ImageFs == nil {
		t.Errorf("node stats %+v", n)
	}

	out, errOut, err := k.run("get", "--raw", base+"/metrics/cadvisor")
	if _, ok := series(out, "container_memory_working_set_bytes", labels); err != nil || !ok {
		t.Errorf("metrics/cadvisor: %v %s\n%s", err, errOut, out)
	}
	out, errOut, err = k.run("get", "--raw", base+"/metrics")
	if _, ok := series(out, "kube_agent_evictions_total", map[string]string{"signal": "memory.available"}); err != nil || !ok {
		t.Errorf("metrics: %v %s\n%s", err, errOut, out)
	}
	if out, _, err := k.run("get", "--raw", base+"/stats/summary?only_cpu_and_memory=maybe"); err == nil {
		t.Errorf("a bad only_cpu_and_memory was accepted: %s", out)
	}

	// The agent itself: a client certificate of a user with no nodes/stats permission.
	node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := srv.Inner().LoopbackConfig("stats-nobody")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, RootCAs: x509.NewCertPool()}}}
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/stats/summary", node.Status.DaemonEndpoints.KubeletEndpoint.Port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("stats/summary for a user without nodes/stats: %s, want 403", resp.Status)
	}
}
