// Package nonft tests a node whose kernel cannot program nftables, as a user sees it: one
// `kube server --agent` (test/netharness) whose agent's Service proxy is told by its probe
// (agent.ServicesOptions.Probe, the test's stand-in for a kernel without nf_tables; the
// machine's nftables is left alone) that nftables is unavailable. The node stays Ready and
// runs pods, but says it does not serve Services: the ServiceProxyReady condition False
// with reason NFTablesUnavailable, a Warning Event on the Node, /healthz/services 503.
// When the probe passes again, the agent takes the table and the node serves Services.
package nonft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/test/netharness"
)

var (
	c *netharness.Cluster
	// broken is what the probe answers: nftables unavailable while true.
	broken atomic.Bool
)

const simulated = "simulated kernel without nf_tables: protocol not supported"

func TestMain(m *testing.M) {
	broken.Store(true)
	os.Exit(netharness.Run(m, netharness.Options{Name: "nonft", Server: func(so *server.Options) {
		so.AgentServices.Probe = func() error {
			if broken.Load() {
				return errors.New(simulated)
			}
			return nil
		}
	}}, &c))
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	servertest.Eventually(t, 2*time.Minute, 300*time.Millisecond, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// nodeCondition is the node's condition of type typ as `kubectl get node -o json` shows it.
func nodeCondition(t *testing.T, typ corev1.NodeConditionType) (corev1.NodeCondition, error) {
	out, errOut, err := c.Kubectl(t, "1.33", "", "get", "node", c.A.Name, "-o", "json")
	if err != nil {
		return corev1.NodeCondition{}, fmt.Errorf("kubectl get node: %w: %s", err, errOut)
	}
	var n corev1.Node
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		return corev1.NodeCondition{}, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c, nil
		}
	}
	return corev1.NodeCondition{}, fmt.Errorf("no %s condition in %+v", typ, n.Status.Conditions)
}

// healthz is the agent's /healthz/services through the API server's nodes/proxy: status
// code and body.
func healthz(t *testing.T) (int, string) {
	var code int
	res := c.Clientset(t).CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", c.A.Name, "proxy", "healthz", "services").Do(context.Background())
	res.StatusCode(&code)
	body, _ := res.Raw()
	return code, string(body)
}

func TestNodeWithoutNFTables(t *testing.T) {
	cs := c.Clientset(t)
	ctx := context.Background()

	eventually(t, "ServiceProxyReady False", func() error {
		cond, err := nodeCondition(t, agent.ConditionServiceProxyReady)
		if err != nil {
			return err
		}
		if cond.Status != corev1.ConditionFalse || cond.Reason != agent.ReasonNFTablesUnavailable || !strings.Contains(cond.Message, simulated) {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
	if ready, err := nodeCondition(t, corev1.NodeReady); err != nil || ready.Status != corev1.ConditionTrue {
		t.Fatalf("the node without nftables is not Ready (its pods should still run): %+v, %v", ready, err)
	}
	eventually(t, "the Warning Event on the Node", func() error {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == c.A.Name && e.Type == corev1.EventTypeWarning && e.Reason == agent.ReasonNFTablesUnavailable && strings.Contains(e.Message, simulated) {
				return nil
			}
		}
		return fmt.Errorf("no %s Warning about the Node among %d Events", agent.ReasonNFTablesUnavailable, len(evs.Items))
	})
	if code, body := healthz(t); code != http.StatusServiceUnavailable || !strings.Contains(body, agent.ReasonNFTablesUnavailable) {
		t.Errorf("/healthz/services: %d %s, want 503 saying %s", code, body, agent.ReasonNFTablesUnavailable)
	}

	// Pods still run there, and a Service is made for one.
	ns := netharness.Namespace(t, cs, nil)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, netharness.HTTPDPod("web", c.A.Name, map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	netharness.WaitPod(t, cs, ns, "web", 2*time.Minute, "Ready", netharness.PodReady)
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond, err := nodeCondition(t, agent.ConditionServiceProxyReady); err != nil || cond.Status != corev1.ConditionFalse {
		t.Fatalf("ServiceProxyReady %+v, %v; want still False", cond, err)
	}

	// nftables back: the agent takes the table at its next try, and the Service answers.
	broken.Store(false)
	eventually(t, "ServiceProxyReady True", func() error {
		cond, err := nodeCondition(t, agent.ConditionServiceProxyReady)
		if err == nil && (cond.Status != corev1.ConditionTrue || cond.Reason != agent.ReasonNFTablesProgrammed) {
			err = fmt.Errorf("condition %+v", cond)
		}
		return err
	})
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	eventually(t, "the ClusterIP answers", func() error {
		resp, err := hc.Get("http://" + svc.Spec.ClusterIP + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.TrimSpace(string(b)) != "web" {
			return fmt.Errorf("answer %q", b)
		}
		return nil
	})
	eventually(t, "/healthz/services 200", func() error {
		if code, body := healthz(t); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
}
