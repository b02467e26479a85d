// Package lifecycle tests the lifecycle engine and the platform kinds end to end, in five
// suites that each start their own in-process server when their first test runs
// (servertest.Fixture; one test binary instead of five, each of which linked the whole
// server):
//
//   - lifecycle (lifecycle_test.go): with kubectl 1.33 against a server whose event bus is a
//     real redis-server started here on a free port (the tests fail, never skip, without
//     redis-server or kubectl.1.33): Tenants, Quotas, AccessPolicies, Credentials,
//     Certificates, cycles, teardown order, illegal phase writes, the bus and the metrics.
//   - lifecyclemem (lifecyclemem_*_test.go): the engine on the default in-memory bus.
//   - component (component*_test.go): the Component kind on simulated nodes and a real
//     redis-server.
//   - release (release*_test.go): the Release and Application kinds on simulated nodes.
//   - volume (volume*_test.go): Volumes, the local-path provisioner and PVC volumes with an
//     in-process agent (its own containerd, bridge kvol<pid>, cluster CIDR 10.241.N.0/23).
package lifecycle

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

// certificateDeletionTimeout is short so that a blocked Certificate deletion stalls within
// the test.
const certificateDeletionTimeout = 2 * time.Second

var (
	srv       *servertest.Server
	serverLog lockedBuffer
	redisAddr string
	auditLog  string
)

// TestMain stops the suites' fixtures that the chosen tests started; each test names its
// suite's fixture (lifecycleSuite.Need(t) …) in its first line.
func TestMain(m *testing.M) {
	os.Exit(servertest.Main(m, lifecycleSuite, memSuite, componentSuite, releaseSuite, volumeSuite))
}

var lifecycleSuite = servertest.NewFixture("lifecycle", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	stop, err := startRedis(filepath.Join(dir, "redis"))
	if err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	fx.Cleanup(stop)
	auditLog = filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources: [{group: kubeos.dev}]\n- level: None\n"), 0o600); err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	srv, err = servertest.StartWith(filepath.Join(dir, "kube"), &serverLog, func(o *server.Options) {
		o.EventBus, o.RedisAddr = "redis", redisAddr
		o.AuditPolicyFile, o.AuditLogPath = policy, auditLog
		o.DeletionTimeouts = map[string]time.Duration{"Certificate": certificateDeletionTimeout}
	})
	if err != nil {
		return fmt.Errorf("lifecycle: start server: %w\n%s", err, serverLog.String())
	}
	fx.Cleanup(func() { srv.Stop() })
	return nil
})

// startRedis runs redis-server on a free port until stop.
func startRedis(dir string) (stop func(), err error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not installed (apt-get install -y redis-server; .ci/run does this): %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		stop()
		return nil, fmt.Errorf("redis-server on port %d not ready within 10s", port)
	}
	redisAddr = "127.0.0.1:" + strconv.Itoa(port)
	return stop, nil
}

// kubectl runs one kubectl binary with its own HOME.
type kubectl struct{ bin, home string }

func newKubectl(t *testing.T) kubectl {
	return kubectl{bin: findKubectl(t, "1.33"), home: t.TempDir()}
}

func (k kubectl) run(t *testing.T, kubeconfig, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	stdout, stderr, err = servertest.RunKubectl(k.bin, k.home, kubeconfig, stdin, args...)
	t.Logf("$ kubectl %s\n%s%s", strings.Join(args, " "), stdout, stderr)
	return stdout, stderr, err
}

// ok runs kubectl as the admin and fails the test if it fails.
func (k kubectl) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := k.run(t, srv.Kubeconfig, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// apply applies a manifest as the admin.
func (k kubectl) apply(t *testing.T, manifest string) {
	t.Helper()
	if _, errOut, err := k.run(t, srv.Kubeconfig, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, errOut, manifest)
	}
}

// fails wants kubectl (as the user of kubeconfig) to fail with want in its error output.
func (k kubectl) fails(t *testing.T, kubeconfig, stdin, want string, args ...string) {
	t.Helper()
	_, errOut, err := k.run(t, kubeconfig, stdin, args...)
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
	servertest.Eventually(t, d, 100*time.Millisecond, f)
}

// jsonpath reads one field with kubectl get -o jsonpath.
func (k kubectl) jsonpath(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, _, err := k.run(t, srv.Kubeconfig, "", append(append([]string{"get"}, args...), "-o", "jsonpath="+path)...)
	if err != nil {
		return ""
	}
	return out
}

// waitFor waits until a jsonpath of an object equals want.
func (k kubectl) waitFor(t *testing.T, d time.Duration, path, want string, args ...string) {
	t.Helper()
	eventually(t, d, func() error {
		if got := k.jsonpath(t, path, args...); got != want {
			return fmt.Errorf("%s of %v is %q, want %q", path, args, got, want)
		}
		return nil
	})
}

func restTransport(cfg *rest.Config) (http.RoundTripper, error) { return rest.TransportFor(cfg) }

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
