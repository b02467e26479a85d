package servicesnet

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/test/netharness"
)

// TestShop is issue 19's "Done when" as one scenario, as a user runs it with kubectl 1.33
// on the two nodes: in namespace shop, a frontend Deployment on node A reaches a backend
// Deployment on node B through http://backend.shop.svc.cluster.local (the cluster DNS, the
// ClusterIP); the backend's NodePort answers on both nodes' addresses; a headless
// StatefulSet's pod resolves as web-0.web.shop.svc.cluster.local; `kubectl port-forward
// svc/backend` reaches the backend; scaled to 0 the Service refuses the frontend, scaled
// to 3 it spreads the frontend's requests over the three; a default-deny policy blocks the
// frontend (while the backend pods' readiness probes, from their own node, still pass: a
// pod replaced under the policy becomes Ready) until an allow policy for the frontend's
// labels lands.
func TestShop(t *testing.T) {
	cs := c.Clientset(t)
	ctx := ctxT(t, 4*time.Minute)
	const ns = "shop"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	kubectl(t, shopManifest(), "apply", "-f", "-")
	for _, w := range []string{"deployment/backend", "deployment/frontend", "statefulset/web"} {
		kubectl(t, "", "-n", ns, "rollout", "status", w, "--timeout=2m")
	}
	onNode(t, ns, "app=frontend", c.A.Name)
	onNode(t, ns, "app=backend", c.B.Name)

	// The frontend reaches the backend by name, across the nodes.
	backendURL := "http://backend.shop.svc.cluster.local/"
	backends := readyPods(t, ns, "app=backend")
	eventually(t, "the frontend reaches "+backendURL, func() error {
		body, err := frontendGet(t, backendURL)
		if err == nil && !slices.Contains(backends, body) {
			err = fmt.Errorf("answer %q, want one of %v", body, backends)
		}
		return err
	})

	// The NodePort answers on both nodes' addresses.
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "backend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		url := fmt.Sprintf("http://%s:%d/", n.IP, svc.Spec.Ports[0].NodePort)
		eventually(t, "NodePort "+url, func() error {
			body, err := get(url)
			if err == nil && !slices.Contains(backends, body) {
				err = fmt.Errorf("answer %q", body)
			}
			return err
		})
	}

	// The headless StatefulSet's pod by its DNS name (busybox's own resolver, then wget's).
	web0, err := cs.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-0.web.shop.svc.cluster.local resolves to web-0", func() error {
		out, err := c.Exec(t, ns, "deploy/frontend", "nslookup", "-type=a", "web-0.web.shop.svc.cluster.local")
		if err == nil && !strings.Contains(out, "Address: "+web0.Status.PodIP) && !strings.Contains(out, "Address 1: "+web0.Status.PodIP) {
			err = fmt.Errorf("nslookup, want %s:\n%s", web0.Status.PodIP, out)
		}
		return err
	})
	eventually(t, "the frontend reaches web-0 by name", func() error {
		body, err := frontendGet(t, "http://web-0.web.shop.svc.cluster.local:8080/")
		if err == nil && body != "web-0" {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})

	// kubectl port-forward svc/backend.
	port := portForward(t, ns, "svc/backend", "80")
	if body, err := get("http://127.0.0.1:" + port + "/"); err != nil || !slices.Contains(backends, body) {
		t.Fatalf("through kubectl port-forward svc/backend: %q, %v", body, err)
	}

	// Scaled to 0, the Service refuses at once (not a timeout).
	kubectl(t, "", "-n", ns, "scale", "deployment/backend", "--replicas=0")
	eventually(t, "the Service refuses with no backend", func() error {
		body, err := frontendGet(t, backendURL)
		if err == nil || !strings.Contains(err.Error(), "refused") {
			return fmt.Errorf("answer %q, %v; want connection refused", body, err)
		}
		return nil
	})

	// Scaled to 3, the requests spread over the three.
	kubectl(t, "", "-n", ns, "scale", "deployment/backend", "--replicas=3")
	kubectl(t, "", "-n", ns, "rollout", "status", "deployment/backend", "--timeout=2m")
	backends = readyPods(t, ns, "app=backend")
	if len(backends) != 3 {
		t.Fatalf("ready backends %v, want 3", backends)
	}
	eventually(t, "30 requests spread over the three backends", func() error {
		seen := map[string]int{}
		answers, failures := frontendGets(t, backendURL, 30)
		if len(failures) > 0 {
			return fmt.Errorf("%d of 30 failed: %q", len(failures), failures)
		}
		for _, a := range answers {
			if !slices.Contains(backends, a) {
				return fmt.Errorf("answer %q, want one of %v", a, backends)
			}
			seen[a]++
		}
		if len(seen) != 3 {
			return fmt.Errorf("answers %v, want all of %v", seen, backends)
		}
		return nil
	})

	// Default deny: the frontend is blocked.
	kubectl(t, denyPolicy, "apply", "-f", "-")
	eventually(t, "the default-deny policy blocks the frontend", func() error {
		return blocked(frontendGets(t, backendURL, 3))
	})
	// The node's own traffic is not filtered: a backend pod replaced now passes its
	// readiness probe, and the frontend stays blocked from it too.
	kubectl(t, "", "-n", ns, "delete", "pod", backends[0], "--wait=false")
	eventually(t, "a replaced backend pod Ready under default deny", func() error {
		now := readyPods(t, ns, "app=backend")
		if len(now) != 3 || slices.Contains(now, backends[0]) {
			return fmt.Errorf("ready backends %v (replacing %s)", now, backends[0])
		}
		backends = now
		return nil
	})
	if err := blocked(frontendGets(t, backendURL, 6)); err != nil {
		t.Fatalf("the frontend through the default-deny policy: %v", err)
	}

	// The allow policy for the frontend's labels lets it through again, to all three.
	kubectl(t, allowPolicy, "apply", "-f", "-")
	eventually(t, "the allow policy lets the frontend through to all three backends", func() error {
		seen := map[string]bool{}
		answers, _ := frontendGets(t, backendURL, 30)
		for _, a := range answers {
			seen[a] = true
		}
		if len(seen) != 3 {
			return fmt.Errorf("answers %v, want all of %v", seen, backends)
		}
		return nil
	})
}

// shopManifest is the scenario's namespace, Deployments, Services and StatefulSet: the
// backend (busybox httpd answering its pod's name on port "http") pinned to node B, the
// frontend (a sleeping busybox: its wget resolves names with the static glibc's built-in
// DNS client, from the resolv.conf the agent writes) to node A.
func shopManifest() string {
	pod := func(app, node, img, command string, readiness bool) string {
		s := fmt.Sprintf(`    metadata:
      labels: {app: %s}
    spec:
      terminationGracePeriodSeconds: 1
      automountServiceAccountToken: false
      nodeSelector: {kubernetes.io/hostname: %s}
      containers:
      - name: main
        image: %s
        imagePullPolicy: Never
        command: ["sh", "-c", %q]
        ports: [{name: http, containerPort: 8080}]
`, app, node, img, command)
		if readiness {
			s += `        readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}
`
		}
		return s
	}
	httpd := `mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www`
	return `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: backend}}
  template:
` + pod("backend", c.B.Name, netharness.BusyboxImage, httpd, true) + `---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: shop}
spec:
  type: NodePort
  selector: {app: backend}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: frontend}}
  template:
` + pod("frontend", c.A.Name, netharness.BusyboxImage, "exec sleep 100000", false) + `---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: shop}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
` + pod("web", c.B.Name, netharness.BusyboxImage, httpd, true)
}

const denyPolicy = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: shop}
spec:
  podSelector: {}
  policyTypes: [Ingress]
`

// allowPolicy lets pods labelled as the frontend reach the backend's named port.
const allowPolicy = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: backend-from-frontend, namespace: shop}
spec:
  podSelector: {matchLabels: {app: backend}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: frontend}}}]
    ports: [{port: http}]
`

// kubectl runs kubectl 1.33 with stdin and fails the test on an error; its output.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := c.Kubectl(t, "1.33", stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// frontendGet is a GET from the frontend Deployment's pod (kubectl exec deploy/frontend).
func frontendGet(t *testing.T, url string) (string, error) {
	return getFromPod(t, "shop", "deploy/frontend", url)
}

// frontendGets makes n GETs from the frontend's pod in one exec: the answers of those that
// succeeded, and what wget said for those that failed.
func frontendGets(t *testing.T, url string, n int) (answers, failures []string) {
	t.Helper()
	script := fmt.Sprintf(`for i in $(seq %d); do if out=$(%s 2>&1); then echo "OK $out"; else echo "FAIL $out"; fi; done; echo END`, n, podGet(url))
	out, err := c.Exec(t, "shop", "deploy/frontend", "sh", "-c", script)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != n+1 || lines[n] != "END" {
		// kubectl exec itself failed: neither answers nor refusals.
		return nil, []string{fmt.Sprintf("exec failed: %v: %q", err, out)}
	}
	for _, l := range lines[:n] {
		if a, ok := strings.CutPrefix(l, "OK "); ok {
			answers = append(answers, strings.TrimSpace(a))
		} else {
			failures = append(failures, strings.TrimPrefix(l, "FAIL"))
		}
	}
	return answers, failures
}

// blocked says the frontend's attempts all failed at the connection (refused by the
// policy, or dropped: a timeout), not at the name or the exec.
func blocked(answers, failures []string) error {
	if len(answers) > 0 {
		return fmt.Errorf("answered %q", answers)
	}
	for _, f := range failures {
		if strings.Contains(f, "exec failed") || strings.Contains(f, "bad address") {
			return fmt.Errorf("not a connection failure: %s", f)
		}
	}
	return nil
}

// readyPods are the names of the Ready pods labelled selector, sorted.
func readyPods(t *testing.T, ns, selector string) []string {
	t.Helper()
	pods, err := c.Clientset(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && netharness.PodReady(p) {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// onNode fails the test unless every pod labelled selector runs on node.
func onNode(t *testing.T, ns, selector, node string) {
	t.Helper()
	pods, err := c.Clientset(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			t.Fatalf("pod %s runs on %q, want %s", p.Name, p.Spec.NodeName, node)
		}
	}
}

// portForward runs kubectl 1.33 port-forward target :port in ns until the test ends; the
// local port it listens on.
func portForward(t *testing.T, ns, target, port string) string {
	t.Helper()
	bin, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-n", ns, "port-forward", target, ":"+port)
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + c.Server.Kubeconfig, "KUBECACHEDIR=" + home + "/cache"}
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p, ok := strings.CutPrefix(sc.Text(), "Forwarding from 127.0.0.1:")
			if f := strings.Fields(p); ok && len(f) > 0 {
				select {
				case found <- f[0]:
				default:
				}
			}
		}
		close(found)
	}()
	select {
	case p, ok := <-found:
		if !ok {
			t.Fatalf("kubectl port-forward %s ended: %s", target, stderr.String())
		}
		return p
	case <-time.After(time.Minute):
		t.Fatalf("kubectl port-forward %s printed no port within a minute: %s", target, stderr.String())
	}
	return ""
}
