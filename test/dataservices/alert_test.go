package dataservices

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/alerting"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/platform"
	"kubeos.dev/kube/internal/server/servertest"
)

// alertHook is the webhook receiver: it records the Alertmanager-format payloads it gets.
type alertHook struct {
	mu   sync.Mutex
	msgs []alerting.WebhookMessage
	bad  []string
}

func (h *alertHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	var m alerting.WebhookMessage
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || r.Header.Get("Content-Type") != "application/json" {
		h.bad = append(h.bad, string(b))
		http.Error(w, "bad payload", 400)
		return
	}
	h.msgs = append(h.msgs, m)
}

func (h *alertHook) last(status string) (alerting.WebhookMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bad) > 0 {
		return alerting.WebhookMessage{}, fmt.Errorf("payloads not in Alertmanager's format: %v", h.bad)
	}
	for i := len(h.msgs) - 1; i >= 0; i-- {
		if h.msgs[i].Status == status {
			return h.msgs[i], nil
		}
	}
	return alerting.WebhookMessage{}, fmt.Errorf("no %s payload yet (%d payloads)", status, len(h.msgs))
}

// alertUserKubeconfig mints a client certificate for user with the server's CA.
func alertUserKubeconfig(t *testing.T, ts *servertest.Server, user string) string {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(ts.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClientCert(user, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := pki.WriteKubeconfig(path, ts.URL, ca.CAPEM, certPEM, keyPEM, user); err != nil {
		t.Fatal(err)
	}
	return path
}

var alertGVR = schema.GroupVersionResource{Group: "kubeos.dev", Version: "v1alpha1", Resource: "alerts"}

// TestAlert: a tenant's user (kubectl 1.33) declares an Alert over Kube's own metrics; the
// metric it watches (Active Certificates) is moved by creating and deleting a Certificate;
// the Alert goes pending → firing → resolved, the user's webhook gets Alertmanager's
// webhook payloads (version 4), Kube Events are recorded on the Alert, the bus counts the
// notifications; a PromQL expression that does not parse, or a bad duration, is refused
// with 422 and the parser's message; the default Alerts exist in kube-system.
func TestAlert(t *testing.T) {
	ts := alertServer(t)
	cfg, err := ts.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	kubectl, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	admin := func(stdin string, args ...string) (string, error) {
		out, stderr, err := servertest.RunKubectl(kubectl, home, ts.Kubeconfig, stdin, args...)
		if err != nil {
			return out, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr)
		}
		return out, nil
	}
	userKC := alertUserKubeconfig(t, ts, "alert-alice")
	alice := func(stdin string, args ...string) (string, string, error) {
		return servertest.RunKubectl(kubectl, home, userKC, stdin, args...)
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	const ns = "alerting-dev"
	must(admin(`apiVersion: kubeos.dev/v1alpha1
kind: Tenant
metadata: {name: alerting}
spec:
  environments: [dev]
  admins: [{kind: User, name: alert-alice}]
`, "apply", "-f", "-"))
	// The Tenant's namespace comes from the engine's reconcile: wait for it.
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		_, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		return err
	})
	must(admin(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: alerts-editor, namespace: alerting-dev}
rules:
- apiGroups: [kubeos.dev]
  resources: [alerts]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alerts-editor, namespace: alerting-dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: alerts-editor}
subjects: [{kind: User, name: alert-alice}]
`, "apply", "-f", "-"))

	t.Run("default alerts for Kube's own health exist in kube-system", func(t *testing.T) {
		servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
			for _, a := range platform.DefaultAlerts() {
				out, err := admin("", "get", "alerts.kubeos.dev", "-n", "kube-system", a.Name, "-o", "jsonpath={.status.phase}/{.status.state}")
				if err != nil {
					return err
				}
				if out != "Active/inactive" {
					return fmt.Errorf("%s: %q", a.Name, out)
				}
			}
			return nil
		})
	})

	t.Run("an expression that does not parse is refused with the parser's message", func(t *testing.T) {
		bad := `rate(kube_lifecycle_transitions_total[5m]`
		perr := alerting.ValidateExpr(bad)
		if perr == nil {
			t.Fatal("the expression parses")
		}
		_, stderr, err := alice(fmt.Sprintf(`apiVersion: kubeos.dev/v1alpha1
kind: Alert
metadata: {name: bad, namespace: %s}
spec: {expr: %q}
`, ns, bad), "apply", "-f", "-")
		if err == nil || !strings.Contains(stderr, "spec.expr") || !strings.Contains(stderr, "unclosed left parenthesis") {
			t.Fatalf("kubectl apply of a bad expr: err %v, stderr %s (parser: %v)", err, stderr, perr)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Alert",
			"metadata": map[string]any{"name": "bad", "namespace": ns}, "spec": map[string]any{"expr": bad}}}
		_, err = dyn.Resource(alertGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
		var se *apierrors.StatusError
		if !apierrors.IsInvalid(err) || !asStatus(err, &se) || se.ErrStatus.Code != 422 || !strings.Contains(err.Error(), perr.Error()) {
			t.Fatalf("create of a bad expr: %v, want 422 with %q", err, perr)
		}
		obj.Object["spec"] = map[string]any{"expr": "up", "for": "5 minutes"}
		if _, err := dyn.Resource(alertGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), "spec.for") {
			t.Fatalf("create with a bad duration: %v, want 422 on spec.for", err)
		}
	})

	t.Run("pending, firing, resolved, with webhook payloads and events", func(t *testing.T) {
		hook := &alertHook{}
		srv := httptest.NewServer(hook)
		defer srv.Close()
		ctx := context.Background()
		certs, err := dyn.Resource(schema.GroupVersionResource{Group: "kubeos.dev", Version: "v1alpha1", Resource: "certificates"}).
			List(ctx, metav1.ListOptions{})
		if err != nil || len(certs.Items) != 0 {
			t.Fatalf("the test needs no Certificate to exist: %v, %d", err, len(certs.Items))
		}
		must(func() (string, error) {
			out, stderr, err := alice(fmt.Sprintf(`apiVersion: kubeos.dev/v1alpha1
kind: Alert
metadata: {name: certs-active, namespace: %s}
spec:
  expr: 'kube_lifecycle_phase{kind="Certificate",phase="Active"} > 0'
  for: 6s
  labels: {severity: page}
  annotations: {summary: '{{ $value }} active {{ $labels.kind }}s'}
  receivers:
  - webhook: {url: %q}
  - events: {}
`, ns, srv.URL+"/hook"), "apply", "-f", "-")
			if err != nil {
				return out, fmt.Errorf("%v: %s", err, stderr)
			}
			return out, nil
		}())
		state := func(want string) func() error {
			return func() error {
				out, stderr, err := alice("", "get", "alert.kubeos.dev", "certs-active", "-n", ns, "-o",
					"jsonpath={.status.phase}/{.status.state}/{.status.lastError}")
				if err != nil {
					return fmt.Errorf("%v: %s", err, stderr)
				}
				if out != "Active/"+want+"/" {
					return fmt.Errorf("phase/state/lastError %q, want Active/%s/", out, want)
				}
				return nil
			}
		}
		servertest.Eventually(t, 90*time.Second, 250*time.Millisecond, state("inactive"))
		must(admin(fmt.Sprintf(`apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: alert-probe, namespace: %s}
spec: {dnsNames: [probe.example]}
`, ns), "apply", "-f", "-"))
		servertest.Eventually(t, 90*time.Second, 250*time.Millisecond, state("pending"))
		if _, err := hook.last("firing"); err == nil {
			t.Fatal("a pending alert was notified")
		}
		servertest.Eventually(t, 90*time.Second, 250*time.Millisecond, state("firing"))
		out := must(admin("", "get", "alert.kubeos.dev", "certs-active", "-n", ns, "-o", "jsonpath={.status.activeSince}|{.status.value}|{.status.lastEvaluation}"))
		if f := strings.Split(out, "|"); len(f) != 3 || f[0] == "" || f[1] != "1" || f[2] == "" {
			t.Fatalf("firing status activeSince|value|lastEvaluation = %q", out)
		}
		var firing alerting.WebhookMessage
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error { firing, err = hook.last("firing"); return err })
		if firing.Version != "4" || len(firing.Alerts) != 1 || firing.GroupLabels["alertname"] != "certs-active" || firing.Receiver == "" {
			t.Fatalf("firing payload %+v", firing)
		}
		a := firing.Alerts[0]
		if a.Status != "firing" || a.Labels["alertname"] != "certs-active" || a.Labels["kind"] != "Certificate" || a.Labels["phase"] != "Active" ||
			a.Labels["severity"] != "page" || a.Annotations["summary"] != "1 active Certificates" || a.StartsAt.IsZero() || !a.EndsAt.IsZero() ||
			a.Fingerprint != alerting.Fingerprint(a.Labels) || a.GeneratorURL == "" {
			t.Fatalf("firing alert %+v", a)
		}
		servertest.Eventually(t, 30*time.Second, 250*time.Millisecond, func() error {
			evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Reason == "AlertFiring" && e.InvolvedObject.Kind == "Alert" && e.InvolvedObject.Name == "certs-active" {
					return nil
				}
				seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+":"+e.Reason)
			}
			st, _ := admin("", "get", "alert.kubeos.dev", "certs-active", "-n", ns, "-o", "jsonpath={.status}")
			return fmt.Errorf("no AlertFiring event on the Alert among %v; status %s", seen, st)
		})

		must(admin("", "delete", "certificate.kubeos.dev", "alert-probe", "-n", ns, "--wait=true"))
		servertest.Eventually(t, 90*time.Second, 250*time.Millisecond, state("inactive"))
		var resolved alerting.WebhookMessage
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error { resolved, err = hook.last("resolved"); return err })
		if len(resolved.Alerts) != 1 || resolved.Alerts[0].Status != "resolved" || resolved.Alerts[0].Fingerprint != a.Fingerprint ||
			!resolved.Alerts[0].StartsAt.Equal(a.StartsAt) || !resolved.Alerts[0].EndsAt.After(a.StartsAt) {
			t.Fatalf("resolved payload %+v (firing alert %+v)", resolved, a)
		}
		metrics := alertScrape(t, cfg, ts.URL)
		for _, want := range []string{`eventbus_events_total{status="published",type="alert_firing"} `, `eventbus_events_total{status="published",type="alert_resolved"} `,
			`kube_alerting_notifications_total{receiver="webhook",result="ok"} `, `kube_alerting_notifications_total{receiver="events",result="ok"} `} {
			if !hasPositive(metrics, want) {
				t.Errorf("/metrics lacks a positive %s", want)
			}
		}
	})

	t.Run("over a registered Prometheus, notifying a registered Alertmanager, tenants limited", func(t *testing.T) {
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "alert_test_broken", Help: "moved by the test"})
		reg.MustRegister(g)
		target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer target.Close()
		relay := &alertHook{}
		hook := httptest.NewServer(relay)
		defer hook.Close()
		dir := t.TempDir()
		promPort, amPort := alertFreePort(t), alertFreePort(t)
		alertWrite(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n- job_name: test\n  static_configs: [{targets: [%q]}]\n",
			target.Listener.Addr().String()))
		alertWrite(t, filepath.Join(dir, "alertmanager.yml"), fmt.Sprintf("route: {receiver: hook, group_by: [alertname], group_wait: 1s, group_interval: 1s, repeat_interval: 1h}\n"+
			"receivers:\n- name: hook\n  webhook_configs: [{url: %q, send_resolved: true}]\n", hook.URL+"/am"))
		alertStart(t, "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
		alertStart(t, "prometheus-alertmanager", "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "am"),
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=")
		for name, kind := range map[string]string{"alert-test-prometheus": servers.Prometheus, "alert-test-alertmanager": servers.Alertmanager} {
			port := promPort
			if kind == servers.Alertmanager {
				port = amPort
			}
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: servers.Namespace, Name: name, Labels: map[string]string{servers.LabelKind: kind},
				Annotations: map[string]string{servers.AnnotationTenants: "alerting"}}, Type: servers.SecretType,
				Data: map[string][]byte{servers.KeyURL: []byte(fmt.Sprintf("http://127.0.0.1:%d", port))}}
			if _, err := cs.CoreV1().Secrets(servers.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			defer cs.CoreV1().Secrets(servers.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		}
		manifest := func(ns string) string {
			return fmt.Sprintf(`apiVersion: kubeos.dev/v1alpha1
kind: Alert
metadata: {name: prom-broken, namespace: %s}
spec:
  server: alert-test-prometheus
  expr: 'alert_test_broken{job="test"} > 0'
  receivers: [{alertmanager: {server: alert-test-alertmanager}}]
`, ns)
		}
		// Another tenant may name neither entry.
		must(admin(`apiVersion: kubeos.dev/v1alpha1
kind: Tenant
metadata: {name: alerting-other}
spec: {environments: [dev]}
`, "apply", "-f", "-"))
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "alerting-other-dev", metav1.GetOptions{})
			return err
		})
		if _, err := admin(manifest("alerting-other-dev"), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "alert-test-prometheus") {
			t.Fatalf("another tenant's Alert on the entry: %v", err)
		}
		other := strings.Replace(manifest("alerting-other-dev"), "  server: alert-test-prometheus\n", "", 1)
		if _, err := admin(other, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "spec.receivers[0].alertmanager.server") {
			t.Fatalf("another tenant's Alert notifying the entry: %v", err)
		}

		g.Set(1)
		must(func() (string, error) {
			out, stderr, err := alice(manifest(ns), "apply", "-f", "-")
			if err != nil {
				return out, fmt.Errorf("%v: %s", err, stderr)
			}
			return out, nil
		}())
		servertest.Eventually(t, 90*time.Second, 250*time.Millisecond, func() error {
			out, err := admin("", "get", "alert.kubeos.dev", "prom-broken", "-n", ns, "-o", "jsonpath={.status.state}/{.status.lastError}")
			if err != nil || out != "firing/" {
				return fmt.Errorf("state/lastError %q %v", out, err)
			}
			return nil
		})
		var m alerting.WebhookMessage
		var err error
		servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error { m, err = relay.last("firing"); return err })
		if m.Version != "4" || len(m.Alerts) != 1 || m.Alerts[0].Labels["alertname"] != "prom-broken" || m.Alerts[0].Labels["job"] != "test" {
			t.Fatalf("Alertmanager relayed %+v", m)
		}
		g.Set(0)
		servertest.Eventually(t, 90*time.Second, 200*time.Millisecond, func() error { _, err := relay.last("resolved"); return err })
		must(admin("", "delete", "alert.kubeos.dev", "prom-broken", "-n", ns))
	})
}

// alertServer is the package's server (main_test.go).
func alertServer(*testing.T) *servertest.Server { return srv }

func asStatus(err error, se **apierrors.StatusError) bool {
	s, ok := err.(*apierrors.StatusError)
	*se = s
	return ok
}

func alertScrape(t *testing.T, cfg *rest.Config, url string) string {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func hasPositive(text, prefix string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			v := strings.TrimSpace(strings.TrimPrefix(line, prefix))
			return v != "0" && v != ""
		}
	}
	return false
}

func alertFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func alertWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// alertStart runs a Debian-packaged server (prometheus, prometheus-alertmanager) until the
// test ends and waits until it is ready.
func alertStart(t *testing.T, bin string, args ...string) {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s is not installed (Debian package %s): %v", bin, bin, err)
	}
	var out servertest.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", bin, out.String())
		}
	})
	var addr string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			addr = v
		}
	}
	servertest.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", bin, resp.Status)
		}
		return nil
	})
}
