package netharness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

// Namespace makes a namespace named after the test (labels added), deleted with its pods
// at the test's end.
func Namespace(t testing.TB, cs kubernetes.Interface, labels map[string]string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = cs.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// BusyboxPod is a pod of one busybox container on node running sh -c script, without a
// service account token, with a 1 s grace period.
func BusyboxPod(name, node, script string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(bool),
			Containers: []corev1.Container{{
				Name: "main", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// HTTPDScript serves "<text>\n" at / on port (busybox httpd); the text defaults to the pod's
// hostname when empty.
func HTTPDScript(port int, text string) string {
	body := text
	if body == "" {
		body = "$(hostname)"
	}
	return fmt.Sprintf(`mkdir -p /www && echo "%s" > /www/index.html && exec httpd -f -p %d -h /www`, body, port)
}

// HTTPDPod is a busybox httpd pod answering its hostname (the pod's name) on port 8080
// (container port "http"), Ready when it answers, labelled labels.
func HTTPDPod(name, node string, labels map[string]string) *corev1.Pod {
	p := BusyboxPod(name, node, HTTPDScript(8080, ""))
	for k, v := range labels {
		p.Labels[k] = v
	}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	return p
}

// WaitPod polls the pod until ok says it is as wanted (what names it in the failure).
func WaitPod(t testing.TB, cs kubernetes.Interface, ns, name string, d time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	servertest.Eventually(t, d, 200*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = p
		if !ok(p) {
			return fmt.Errorf("pod %s/%s not %s: phase %s, conditions %v, containers %+v", ns, name, what, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		return nil
	})
	return last
}

// PodReady says the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Kubectl runs kubectl of version ("1.33", "1.27") as admin; stdin may be "".
func (c *Cluster) Kubectl(t testing.TB, version, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	return servertest.RunKubectl(bin, home, c.Server.Kubeconfig, stdin, args...)
}

// Exec runs a command in a pod's (first) container through kubectl 1.33 exec; stdout, and
// the error with stderr.
func (c *Cluster) Exec(t testing.TB, ns, pod string, cmd ...string) (string, error) {
	t.Helper()
	out, errOut, err := c.Kubectl(t, "1.33", "", append([]string{"-n", ns, "exec", pod, "--"}, cmd...)...)
	if err != nil {
		return out, fmt.Errorf("exec %v in %s/%s: %w: %s", cmd, ns, pod, err, strings.TrimSpace(errOut))
	}
	return out, nil
}

// Logf writes a line to the harness's log directory's test.log (kept when a test failed).
func (c *Cluster) Logf(format string, args ...any) {
	f, err := os.OpenFile(c.logDir()+"/test.log", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}
