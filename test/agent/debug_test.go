package agent

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

// TestDebugServices: the agent's API mounts the Service proxy's /debug/services, reached
// through nodes/<node>/proxy and authorised as nodes/proxy (this package's agent runs no
// proxy, so the handler itself says so); a user without nodes/proxy is refused.
func TestDebugServices(t *testing.T) {
	ctx := context.Background()
	cs := clientset(t)
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "debug", "services").DoRaw(ctx)
	if !apierrors.IsNotFound(err) || !strings.Contains(string(body)+err.Error(), "the Service proxy is not running") {
		t.Fatalf("/debug/services through nodes/proxy: %v %q, want the handler's own 404", err, body)
	}
	cfg, err := srv.Inner().LoopbackConfig("debug-nobody")
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "debug", "services").DoRaw(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("a user without nodes/proxy: %v, want 403", err)
	}
}
