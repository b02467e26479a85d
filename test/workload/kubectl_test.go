package workload

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestKubectlWorkloads is the "Done when", once with kubectl 1.27 (JSON bodies, SPDY
// era) and once with 1.33 (protobuf bodies on its typed commands).
func TestKubectlWorkloads(t *testing.T) {
	for _, v := range []string{"1.27", "1.33"} {
		t.Run(v, func(t *testing.T) {
			k := newKubectl(t, v)
			ns := "wl-" + strings.ReplaceAll(v, ".", "-")
			k.ok("", "create", "namespace", ns)
			contains(t, "run", k.ok("", "run", "nginx", "--image=nginx", "-n", ns), "pod/nginx created")
			wide := k.ok("", "get", "pods", "-o", "wide", "-n", ns)
			if !regexp.MustCompile(`NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES`).MatchString(wide) ||
				!regexp.MustCompile(`nginx\s+0/1\s+Pending\s+0\s+\S+\s+<none>\s+<none>\s+<none>\s+<none>`).MatchString(wide) {
				t.Errorf("get pods -o wide: not upstream's columns:\n%s", wide)
			}
			contains(t, "create deployment", k.ok("", "create", "deployment", "web", "--image=nginx", "--replicas=2", "-n", ns), "deployment.apps/web created")
			contains(t, "create job", k.ok("", "create", "job", "j", "--image=busybox", "-n", ns, "--", "echo", "hi"), "job.batch/j created")
			contains(t, "create cronjob", k.ok("", "create", "cronjob", "cj", "--image=busybox", "--schedule=*/5 * * * *", "-n", ns), "cronjob.batch/cj created")
			contains(t, "create service", k.ok("", "create", "service", "clusterip", "s1", "--tcp=80:8080", "-n", ns), "service/s1 created")
			contains(t, "expose", k.ok("", "expose", "deployment", "web", "--port=80", "-n", ns), "service/web exposed")
			contains(t, "create pdb", k.ok("", "create", "pdb", "p1", "--selector=app=web", "--min-available=1", "-n", ns), "poddisruptionbudget.policy/p1 created")
			contains(t, "create priorityclass", k.ok("", "create", "priorityclass", "high-"+ns, "--value=1000"), "priorityclass.scheduling.k8s.io/high-"+ns+" created")
			contains(t, "scale", k.ok("", "scale", "deployment", "web", "--replicas=3", "-n", ns), "deployment.apps/web scaled")
			if got := k.ok("", "get", "deployment", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "3" {
				t.Errorf("replicas after scale: %q", got)
			}
			all := k.ok("", "get", "all", "-n", ns)
			contains(t, "get all", all, "pod/nginx", "service/s1", "service/web", "deployment.apps/web", "job.batch/j", "cronjob.batch/cj")
			deploy := k.ok("", "get", "deploy", "-n", ns)
			if !regexp.MustCompile(`NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE`).MatchString(deploy) || !regexp.MustCompile(`(?m)^web\s+0/3\s+\d\s+0\s`).MatchString(deploy) {
				t.Errorf("get deploy: not upstream's columns:\n%s", deploy)
			}
			contains(t, "get pc", k.ok("", "get", "priorityclass"), "system-cluster-critical", "2000000000", "system-node-critical", "2000001000")
			contains(t, "explain", k.ok("", "explain", "pod.spec.containers.livenessProbe"), "Periodic probe of container liveness", "httpGet")
			// The namespace's default ServiceAccount exists and gets tokens.
			servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
				_, err := k.run("", "get", "serviceaccount", "default", "-n", ns)
				return err
			})
			tok := strings.TrimSpace(k.ok("", "create", "token", "default", "-n", ns))
			if strings.Count(tok, ".") != 2 {
				t.Errorf("create token: not a JWT: %q", tok)
			}
			// An unscheduled pod goes at once: its grace period is forced to 0.
			k.ok("", "delete", "pod", "nginx", "-n", ns, "--wait=true", "--timeout=30s")
			k.fails("", []string{`pods "nginx" not found`}, "get", "pod", "nginx", "-n", ns)
			// Bad input: upstream's messages.
			k.fails(`apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  containers:
  - name: a
    image: ""
  - name: a
    image: x
`, []string{`The Pod "bad" is invalid`, "spec.containers[0].image: Required value", `spec.containers[1].name: Duplicate value: "a"`}, "apply", "-f", "-", "-n", ns)
			k.fails(`apiVersion: apps/v1
kind: Deployment
metadata: {name: mismatch}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: b}}
    spec: {containers: [{name: c, image: x}]}
`, []string{`The Deployment "mismatch" is invalid`, "spec.template.metadata.labels: Invalid value", "`selector` does not match template `labels`"}, "apply", "-f", "-", "-n", ns)
		})
	}
}
