//go:build scale

// The kill -9 tests at the size (1,000 pods, 500 completions): several minutes of
// both cores each, beyond the default suite's budget; run them with the scale tag:
//
//	go test -tags scale -run 'TestRolloutSurvivesKill9|TestJobSurvivesKill9' -timeout 60m ./test/ha/
//
// (KUBE_TEST_BINARY names a prebuilt kube binary.) TestControllersFailOver stays in the
// default suite.

package ha

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/simnode"
)

// TestRolloutSurvivesKill9: a Deployment of 1,000 pods on simulated nodes rolls out (maxSurge
// 25 %, maxUnavailable 0); `kube server` is killed with SIGKILL when a third of the pods are
// updated and started again on the same data directory. The rollout completes; a watcher of
// the pods never sees more non-terminating pods than replicas + maxSurge nor fewer Ready
// than replicas, and no pod goes without having been deleted.
func TestRolloutSurvivesKill9(t *testing.T) {
	const replicas, surge = 1000, 250 // 25 %
	begin := time.Now()
	dir := t.TempDir()
	bin := kubeBinary(t, dir)
	port := freePorts(t, 1)[0]
	s := startKube(t, bin, "kube server", filepath.Join(dir, "data"), port, "--sim-nodes", "15")
	dump := func() string { return tail(s.out.String(), 30) }
	t.Logf("server up after %s", time.Since(begin).Round(time.Millisecond))
	ctx := context.Background()
	ns := "rollout"
	createNamespace(t, s.cs, ns)
	deps := s.cs.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, deployment("web", replicas, intstr.FromString("25%"), intstr.FromInt32(0)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Minute, "1,000 pods available", dump, func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return rolloutDone(d)
	})
	t.Logf("1,000 pods available after %s", time.Since(begin).Round(time.Millisecond))

	w := watchPods(t, s.cfgW, ns, "app=web")
	w.track()
	updateImage(t, s.cs, ns, "web", "registry.example/app:v2")
	waitFor(t, 10*time.Minute, "a third of the pods updated", dump, func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.UpdatedReplicas < replicas/3 {
			return fmt.Errorf("updated %d", d.Status.UpdatedReplicas)
		}
		return nil
	})
	s.kill()
	t.Logf("killed with SIGKILL mid-rollout after %s", time.Since(begin).Round(time.Millisecond))
	s.restart(t, "kube server (restarted)")
	t.Logf("restarted after %s", time.Since(begin).Round(time.Millisecond))
	dump = func() string { return tail(s.out.String(), 30) }
	waitFor(t, 15*time.Minute, "the rollout complete after the restart", dump, func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return rolloutDone(d)
	})
	t.Logf("rollout complete after %s", time.Since(begin).Round(time.Millisecond))

	// The end state: replicas pods, all of the new template, Running and Ready; the old
	// ReplicaSet at 0.
	rss, err := s.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var newHash string
	for _, rs := range rss.Items {
		switch rs.Spec.Template.Spec.Containers[0].Image {
		case "registry.example/app:v2":
			newHash = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		default:
			if *rs.Spec.Replicas != 0 || rs.Status.Replicas != 0 {
				t.Errorf("old ReplicaSet %s: spec %d, status %d replicas; want 0", rs.Name, *rs.Spec.Replicas, rs.Status.Replicas)
			}
		}
	}
	if len(rss.Items) != 2 || newHash == "" {
		t.Fatalf("%d ReplicaSets, new one found: %t; want 2 and a new one", len(rss.Items), newHash != "")
	}
	waitFor(t, 2*time.Minute, "only the new pods left", dump, func() error {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != newHash {
				return fmt.Errorf("old pod %s still there", p.Name)
			}
			if p.DeletionTimestamp != nil || !podReady(&p) {
				return fmt.Errorf("pod %s terminating or not Ready", p.Name)
			}
			n++
		}
		if n != replicas {
			return fmt.Errorf("%d pods, want %d", n, replicas)
		}
		return nil
	})
	most, leastReady, vanished := w.result()
	t.Logf("observed at most %d non-terminating pods (limit %d), at least %d Ready (limit %d)", most, replicas+surge, leastReady, replicas)
	if most > replicas+surge {
		t.Errorf("%d non-terminating pods at one moment, more than replicas + maxSurge = %d", most, replicas+surge)
	}
	if leastReady < replicas {
		t.Errorf("only %d Ready pods at one moment with maxUnavailable 0, want at least %d", leastReady, replicas)
	}
	if len(vanished) > 0 {
		t.Errorf("%d pods went without being deleted first: %v", len(vanished), vanished[:min(len(vanished), 10)])
	}
}

// TestJobSurvivesKill9: two Jobs of 500 completions (parallelism 50), one NonIndexed and
// one Indexed, on simulated nodes whose pods succeed after 2 s; `kube server` is killed with
// SIGKILL when both are past 150 and started again. Both complete with exactly 500
// succeeded pods and status.succeeded 500, each index of the Indexed one succeeded once.
func TestJobSurvivesKill9(t *testing.T) {
	const completions, parallelism = 500, 50
	begin := time.Now()
	dir := t.TempDir()
	bin := kubeBinary(t, dir)
	port := freePorts(t, 1)[0]
	s := startKube(t, bin, "kube server", filepath.Join(dir, "data"), port, "--sim-nodes", "5")
	dump := func() string { return tail(s.out.String(), 30) }
	ctx := context.Background()
	ns := "jobs"
	createNamespace(t, s.cs, ns)
	jobs := s.cs.BatchV1().Jobs(ns)
	for _, mode := range []batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion} {
		name := strings.ToLower(string(mode))
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{
				Completions: ptr.To[int32](completions), Parallelism: ptr.To[int32](parallelism),
				CompletionMode: ptr.To(mode), BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simnode.RunTimeAnnotation: "2s"}},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "work", Image: "registry.example/work:v1"}}},
				},
			},
		}
		if _, err := jobs.Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Minute, "both Jobs past 150 completions", dump, func() error {
		for _, name := range []string{"nonindexed", "indexed"} {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if j.Status.Succeeded < 150 {
				return fmt.Errorf("%s: %d succeeded", name, j.Status.Succeeded)
			}
		}
		return nil
	})
	s.kill()
	t.Logf("killed with SIGKILL after %s", time.Since(begin).Round(time.Millisecond))
	s.restart(t, "kube server (restarted)")
	dump = func() string { return tail(s.out.String(), 30) }
	for _, name := range []string{"nonindexed", "indexed"} {
		waitFor(t, 10*time.Minute, name+" Complete", dump, func() error {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					return nil
				}
				if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
					t.Fatalf("%s failed: %s %s", name, c.Reason, c.Message)
				}
			}
			return fmt.Errorf("%d succeeded, %d active, %d failed", j.Status.Succeeded, j.Status.Active, j.Status.Failed)
		})
		j, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Succeeded != completions || j.Status.Failed != 0 {
			t.Errorf("%s: status.succeeded %d, failed %d; want %d and 0", name, j.Status.Succeeded, j.Status.Failed, completions)
		}
		if name == "indexed" && j.Status.CompletedIndexes != fmt.Sprintf("0-%d", completions-1) {
			t.Errorf("indexed: completedIndexes %q, want 0-%d", j.Status.CompletedIndexes, completions-1)
		}
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		succeeded := map[string]int{}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded {
				continue
			}
			n++
			succeeded[p.Labels["batch.kubernetes.io/job-completion-index"]]++
			if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				t.Errorf("%s: succeeded pod %s still has the job-tracking finalizer", name, p.Name)
			}
		}
		if n != completions {
			t.Errorf("%s: %d succeeded pods, want exactly %d", name, n, completions)
		}
		if name == "indexed" {
			for i := range completions {
				if c := succeeded[fmt.Sprint(i)]; c != 1 {
					t.Errorf("indexed: index %d succeeded %d times, want once", i, c)
				}
			}
		}
	}
	t.Logf("done after %s", time.Since(begin).Round(time.Millisecond))
}
