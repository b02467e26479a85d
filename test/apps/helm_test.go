package apps

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

type helm struct {
	t    *testing.T
	bin  string
	home string
}

func (h *helm) ok(args ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + h.home, "KUBECONFIG=" + helmSrv.Kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(h.home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(h.home, "config"), "HELM_DATA_HOME=" + filepath.Join(h.home, "data")}
	out, err := cmd.CombinedOutput()
	h.t.Logf("$ helm %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		h.t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestHelmLifecycle installs, upgrades, rolls back and uninstalls the chart with --wait:
// each --wait returns only once the Deployment's new ReplicaSet is ready and the hook Job
// complete, and what Helm leaves behind is what it says.
func TestHelmLifecycle(t *testing.T) {
	helmSuite.Need(t)
	cfg, err := helmSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := &helm{t: t, bin: helmBinary(t), home: t.TempDir()}
	chart, err := filepath.Abs("helm-chart")
	if err != nil {
		t.Fatal(err)
	}
	const ns = "shop"

	h.ok("install", "web", chart, "-n", ns, "--create-namespace", "--wait", "--timeout=3m")
	checkRelease(t, cs, ns, "registry.k8s.io/pause:3.9", 2, 1)
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP == "" {
		t.Errorf("Service web: %v, clusterIP %q", err, svc.Spec.ClusterIP)
	}
	for _, get := range []func() error{
		func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Secrets(ns).Get(ctx, "web-secret", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "web", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Error(err)
		}
	}

	h.ok("upgrade", "web", chart, "-n", ns, "--wait", "--timeout=3m", "--set", "image=registry.k8s.io/pause:3.10", "--set", "replicas=3", "--set", "greeting=hi")
	checkRelease(t, cs, ns, "registry.k8s.io/pause:3.10", 3, 2)

	h.ok("rollback", "web", "1", "-n", ns, "--wait", "--timeout=3m")
	checkRelease(t, cs, ns, "registry.k8s.io/pause:3.9", 2, 3)
	hist := h.ok("history", "web", "-n", ns)
	for _, want := range []string{"Install complete", "Upgrade complete", "Rollback to 1"} {
		if !strings.Contains(hist, want) {
			t.Errorf("helm history lacks %q", want)
		}
	}

	h.ok("uninstall", "web", "-n", ns, "--wait", "--timeout=3m")
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Deployment web: %v", err)
		}
		if _, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service web: %v", err)
		}
		l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil || len(l.Items) != 0 {
			return fmt.Errorf("release secrets left: %v %d", err, len(l.Items))
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=web"})
		if err != nil || len(pods.Items) != 0 {
			return fmt.Errorf("pods of the Deployment left: %v %d", err, len(pods.Items))
		}
		return nil
	})
}

// checkRelease checks the state a --wait promised: the Deployment rolled out at image
// with replicas Ready pods of that image, the hook Job complete, and the release Secret
// of revision deployed.
func checkRelease(t *testing.T, cs kubernetes.Interface, ns, image string, replicas int32, revision int) {
	t.Helper()
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("Deployment image %s, want %s", got, image)
	}
	rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var newRS *appsv1.ReplicaSet
	for i, rs := range rss.Items {
		if rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
			newRS = &rss.Items[i]
		}
	}
	// Helm's v3 readiness: the new ReplicaSet has at least replicas - maxUnavailable ready.
	if newRS == nil || newRS.Spec.Template.Spec.Containers[0].Image != image || newRS.Status.ReadyReplicas < replicas-1 {
		t.Errorf("after --wait the new ReplicaSet is %+v", newRS)
	}
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, "web-migrate", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("hook Job: %v", err)
	}
	complete := false
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			complete = true
		}
	}
	if !complete {
		t.Errorf("hook Job not complete after --wait: %+v", job.Status)
	}
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, fmt.Sprintf("sh.helm.release.v1.web.v%d", revision), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("release secret of revision %d: %v", revision, err)
	}
	if sec.Labels["status"] != "deployed" || sec.Type != "helm.sh/release.v1" {
		t.Errorf("release secret labels %v type %s", sec.Labels, sec.Type)
	}
}
