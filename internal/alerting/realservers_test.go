package alerting

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kubeos.dev/kube/internal/server/servertest/slot"
)

// TestRealPrometheusAndAlertmanager evaluates a rule through a real Prometheus (Debian's
// prometheus, scraping a gauge the test moves) and notifies a real Alertmanager (Debian's
// prometheus-alertmanager), whose webhook receiver is the test's server: the payloads it
// relays are the ones our own Webhook receiver mimics.
func TestRealPrometheusAndAlertmanager(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (Debian package prometheus): ", err)
	}
	amBin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatal("alertmanager is not installed (Debian package prometheus-alertmanager): ", err)
	}
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_broken", Help: "h"})
	reg.MustRegister(g)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()

	var mu sync.Mutex
	var relayed []WebhookMessage
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m WebhookMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		relayed = append(relayed, m)
		mu.Unlock()
	}))
	defer hook.Close()

	dir := t.TempDir()
	promPort, amPort := freePort(t), freePort(t)
	write(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
- job_name: test
  static_configs: [{targets: ["%s"]}]
`, target.Listener.Addr()))
	write(t, filepath.Join(dir, "alertmanager.yml"), fmt.Sprintf(`route: {receiver: hook, group_by: [alertname], group_wait: 1s, group_interval: 1s, repeat_interval: 1h}
receivers:
- name: hook
  webhook_configs: [{url: "%s/am", send_resolved: true}]
`, hook.URL))
	start(t, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	start(t, amBin, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "am"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=")
	promURL, amURL := fmt.Sprintf("http://127.0.0.1:%d", promPort), fmt.Sprintf("http://127.0.0.1:%d", amPort)
	ready(t, promURL+"/-/ready")
	ready(t, amURL+"/-/ready")

	ev, err := New(Options{ResendDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ev.Set(Rule{Key: "ns/broken", Namespace: "ns", Name: "Broken", Expr: `test_broken{job="test"} > 0`, Prometheus: promURL,
		Labels: map[string]string{"severity": "page"}, Receivers: []Notifier{&Alertmanager{URL: amURL}}})
	ctx := context.Background()
	g.Set(1)
	until(t, "the rule fires over Prometheus", func() bool {
		ev.EvaluateOnce(ctx, time.Now())
		st, _ := ev.Status("ns/broken")
		return st.State == StateFiring
	})
	last := func() (WebhookMessage, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(relayed) == 0 {
			return WebhookMessage{}, false
		}
		return relayed[len(relayed)-1], true
	}
	until(t, "Alertmanager relays the firing alert", func() bool { m, ok := last(); return ok && m.Status == "firing" })
	m, _ := last()
	if m.Version != "4" || len(m.Alerts) != 1 || m.Alerts[0].Labels["alertname"] != "Broken" || m.Alerts[0].Labels["severity"] != "page" ||
		m.Alerts[0].Labels["job"] != "test" || m.Alerts[0].Fingerprint != Fingerprint(m.Alerts[0].Labels) {
		t.Fatalf("relayed %+v", m)
	}
	g.Set(0)
	until(t, "the rule resolves", func() bool {
		ev.EvaluateOnce(ctx, time.Now())
		st, _ := ev.Status("ns/broken")
		return st.State == StateInactive && st.LastError == ""
	})
	until(t, "Alertmanager relays the resolution", func() bool { m, ok := last(); return ok && m.Status == "resolved" })
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := slot.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(bin)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%s log:\n%s", bin, b)
		}
		out.Close()
	})
}

func ready(t *testing.T, u string) {
	t.Helper()
	until(t, u, func() bool {
		resp, err := http.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
