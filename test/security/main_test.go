// Package security tests authentication, authorization and admission end to end, in three
// suites that each start their own in-process server when their first test runs
// (servertest.Fixture; one test binary instead of three, each of which linked the whole
// server):
//
//   - security (security_*_test.go): the kubectl
//     session as two users (the admin and a user made with `kube certs user` who holds edit
//     in one namespace) with real kubectl 1.27 and 1.33, and the bad-input cases (missing,
//     expired and foreign client certificates, tokens of deleted service accounts, RBAC
//     denials, escalation, impersonation), on a server with --token-auth-file.
//   - admission (admission_*_test.go): admission webhooks, ValidatingAdmissionPolicy, the
//     audit log and encryption at rest.
//   - podadmission (podadmission*_test.go): kube-apiserver's default admission plugins.
//
// The kubectl binaries are kubectl.1.27 and kubectl.1.33 on PATH or beside the kubectl PATH
// finds (the google-cloud-cli package); the tests fail, never skip, without them.
package security

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubeos.dev/kube/internal/cli"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var (
	srv       *servertest.Server
	serverLog lockedBuffer
)

// TestMain stops the suites' fixtures that the chosen tests started; each test names its
// suite's fixture (securitySuite.Need(t) …) in its first line.
func TestMain(m *testing.M) {
	os.Exit(servertest.Main(m, securitySuite, admissionSuite, podadmissionSuite))
}

var securitySuite = servertest.NewFixture("security", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	// A static token for TestStaticToken (--token-auth-file, upstream's CSV format).
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(staticToken+",carol,carol-uid,\"devs,ops\"\n"), 0o600); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if srv, err = servertest.StartWith(dir, &serverLog, func(o *server.Options) { o.TokenAuthFile = tokens }); err != nil {
		return fmt.Errorf("security: start server: %w\n%s", err, serverLog.String())
	}
	fx.Cleanup(func() { srv.Stop() })
	return nil
})

// adminClient is a typed client as the admin (system:masters).
func adminClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// certsUser runs `kube certs user` in-process, as the binary does, and returns the
// kubeconfig path.
func certsUser(t *testing.T, name string, groups ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".kubeconfig")
	args := []string{"certs", "user", name, "--data-dir", srv.DataDir, "-o", out}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	var stdout, stderr bytes.Buffer
	cmd := cli.NewCommand(&stdout, &stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("kube %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// baseConfig is a client configuration that trusts the server's CA and carries no
// credentials.
func baseConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, QPS: -1}
}

// kubectl runs one kubectl with its own HOME.
type kubectl struct {
	bin, home string
}

func (k kubectl) run(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	stdout, stderr, err = servertest.RunKubectl(k.bin, k.home, kubeconfig, "", args...)
	t.Logf("$ kubectl %s\n%s%s", strings.Join(args, " "), stdout, stderr)
	return stdout, stderr, err
}

// ok runs kubectl and fails the test if it fails.
func (k kubectl) ok(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, errOut, err := k.run(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// fails runs kubectl, wants it to fail with want in its error output.
func (k kubectl) fails(t *testing.T, kubeconfig, want string, args ...string) {
	t.Helper()
	_, errOut, err := k.run(t, kubeconfig, args...)
	if err == nil {
		t.Fatalf("kubectl %s succeeded, want an error with %q", strings.Join(args, " "), want)
	}
	if !strings.Contains(errOut, want) {
		t.Fatalf("kubectl %s: error output\n%s\nwant it to contain %q", strings.Join(args, " "), errOut, want)
	}
}

// eventually retries f until it returns nil or d passes (servertest.Eventually).
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	servertest.Eventually(t, d, 50*time.Millisecond, f)
}

// bareKubeconfig is a kubeconfig with the server and its CA and no credentials, for
// kubectl --token.
func bareKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	c := clientcmdapi.NewConfig()
	c.Clusters["kube"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["none"] = &clientcmdapi.AuthInfo{}
	c.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "none"}
	c.CurrentContext = "kube"
	p := filepath.Join(t.TempDir(), "bare.kubeconfig")
	if err := clientcmd.WriteToFile(*c, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// findKubectl is servertest.FindKubectl, failing the test when kubectl.<version> is missing.
func findKubectl(t *testing.T, version string) string {
	t.Helper()
	p, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type lockedBuffer = servertest.Buffer
