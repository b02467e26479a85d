package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server"
)

// TestBadConfig: a KubeSchedulerConfiguration with an unknown field or plugin refuses the
// server's start, naming it.
func TestBadConfig(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown field", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScoreX: 10\n", `unknown field "percentageOfNodesToScoreX"`},
		{"unknown plugin", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  plugins:\n    filter:\n      enabled:\n      - name: NoSuchPlugin\n", `plugin "NoSuchPlugin" does not exist`},
		{"unknown plugin args field", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategyX: {}\n", `unknown field "scoringStrategyX"`},
		{"bad percentage", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 101\n", "percentageOfNodesToScore"},
		{"wrong version", "apiVersion: kubescheduler.config.k8s.io/v9\nkind: KubeSchedulerConfiguration\n", "kubescheduler.config.k8s.io/v9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(f, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			o := server.Options{DataDir: t.TempDir()}
			o.SchedulerConfigFile = f
			o.Complete()
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestMalformedNode: nodes with odd capacity (none at all, zero pods, a huge value, an
// extended resource) do not stop the scheduler, and pods still land on good nodes.
func TestMalformedNode(t *testing.T) {
	cs := cluster(t)
	ns := "malformed"
	createNamespace(t, cs, ns)
	odd := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "odd-empty"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "odd-values"}, Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9e18"), corev1.ResourcePods: resource.MustParse("0"), "example.com/x": resource.MustParse("1")},
			Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1k"), "hugepages-2Mi": resource.MustParse("3")}}},
	}
	for _, n := range odd {
		created, err := cs.CoreV1().Nodes().Create(ctxT(t), n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = n.Status
		_, _ = cs.CoreV1().Nodes().UpdateStatus(ctxT(t), created, metav1.UpdateOptions{})
		name := n.Name
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	p := pausePod(ns, "after-odd")
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	create(t, cs, p)
	if got := waitScheduled(t, cs, ns, "after-odd"); got != "n-00" {
		t.Errorf("on %s", got)
	}
	// A pod asking for what the odd node claims to have fits nowhere (and is told so).
	x := pausePod(ns, "wants-x")
	x.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/x": resource.MustParse("1")}
	x.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/x": resource.MustParse("1")}
	create(t, cs, x)
	if msg := waitUnschedulable(t, cs, ns, "wants-x"); !strings.Contains(msg, "Insufficient example.com/x") {
		t.Errorf("message %q", msg)
	}
}

// TestMetrics: the scheduler_* series kube-scheduler exports are on /metrics.
func TestMetrics(t *testing.T) {
	cs := cluster(t)
	ns := "metrics"
	createNamespace(t, cs, ns)
	create(t, cs, pausePod(ns, "m"))
	waitScheduled(t, cs, ns, "m")
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, want := range []string{
		`scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"}`,
		`scheduler_schedule_attempts_total{profile="bin-packing",result="unschedulable"} 0`,
		`scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="`,
		`scheduler_pending_pods{queue="active"}`,
		`scheduler_pending_pods{queue="unschedulable"}`,
		`scheduler_pending_pods{queue="gated"}`,
		`scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestInvalidAffinityRefused: a pod whose affinity cannot be evaluated never reaches the
// scheduler: validation refuses it.
func TestInvalidAffinityRefused(t *testing.T) {
	cs := cluster(t)
	ns := "invalid"
	createNamespace(t, cs, ns)
	p := pausePod(ns, "bad")
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: "", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}}}
	_, err := cs.CoreV1().Pods(ns).Create(ctxT(t), p, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create: %v, want 422 Invalid", err)
	}
}
