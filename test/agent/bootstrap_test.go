package agent

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/server/servertest"
)

// TestBootstrapToken: `kube token create` makes an upstream-format bootstrap token; with it
// an agent's TLS bootstrap gets a CSR for system:node:<name> approved and signed by the
// server, and the kubeconfig it writes authenticates as that node.
func TestBootstrapToken(t *testing.T) {
	cs := clientset(t)
	// The binary first: its link (shared with other packages) may take minutes on a loaded
	// machine, and is not what the test's deadline is for.
	bin := servertest.BuildKube(t, t.TempDir())
	ctx := ctxT(t, 3*time.Minute)
	out, err := exec.Command(bin, "token", "create", "--kubeconfig", srv.Kubeconfig, "--ttl", "10m").CombinedOutput()
	if err != nil {
		t.Fatalf("kube token create: %v %s", err, out)
	}
	tok := strings.TrimSpace(string(out))
	id, _, _ := strings.Cut(tok, ".")
	sec, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil || sec.Type != "bootstrap.kubernetes.io/token" || string(sec.Data["usage-bootstrap-authentication"]) != "true" {
		t.Fatalf("token secret %+v %v", sec, err)
	}
	node := nodeName + "-boot"
	dataDir := t.TempDir()
	kc, err := agent.Bootstrap(ctx, agent.BootstrapOptions{DataDir: dataDir, Server: srv.URL, Token: tok,
		CAFile: filepath.Join(srv.DataDir, "pki", "ca.crt"), NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	ncs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ncs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Status.UserInfo; u.Username != "system:node:"+node || !strings.Contains(strings.Join(u.Groups, ","), "system:nodes") {
		t.Errorf("bootstrapped identity %+v", u)
	}
	// A wrong token is refused.
	if _, err := agent.Bootstrap(ctx, agent.BootstrapOptions{DataDir: t.TempDir(), Server: srv.URL, Token: id + ".0000000000000000",
		CAFile: filepath.Join(srv.DataDir, "pki", "ca.crt"), NodeName: node + "x"}); err == nil {
		t.Error("bootstrap with a wrong token secret succeeded")
	}
}
