// Package ctl tests the operator's tools, in three suites that each start their own
// in-process server when their first test runs (servertest.Fixture; one test binary instead
// of three, each of which linked the whole server):
//
//   - ctl (ctl_*_test.go): `kube ctl` (and `kubectl kube`, the same binary found
//     by kubectl 1.33's plugin lookup on PATH) against a server with an audit log: a scenario
//     with the six platform kinds, a dependency chain three deep, a diamond, a cycle attempt,
//     a failing and a missing dependency, deletions held by a finalizer and by dependents,
//     and a user with view rights on one namespace only.
//   - dashboard (dashboard_*_test.go): the operator dashboard at /ui/, over net/http and in
//     headless Chromium.
//   - streaming (streaming*_test.go): logs, exec, attach, port-forward and nodes/proxy with
//     kubectl 1.27 and 1.33 and client-go, against a stub agent.
package ctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var (
	srv       *servertest.Server
	serverLog servertest.Buffer
	kubeBin   string
	binDir    string
)

// TestMain stops the suites' fixtures that the chosen tests started; each test names its
// suite's fixture (ctlSuite.Need(t) …) in its first line.
func TestMain(m *testing.M) {
	os.Exit(servertest.Main(m, ctlSuite, dashboardSuite, streamingSuite))
}

var ctlSuite = servertest.NewFixture("ctl", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return fmt.Errorf("ctl: %w", err)
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	binDir = filepath.Join(dir, "bin")
	if kubeBin, err = servertest.KubeBinary(); err != nil {
		return fmt.Errorf("ctl: %w", err)
	}
	// kubectl finds plugins on PATH: kubectl-kube is the same binary under the plugin's name.
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("ctl: %w", err)
	}
	if err := os.Symlink(kubeBin, filepath.Join(binDir, "kubectl-kube")); err != nil {
		return fmt.Errorf("ctl: %w", err)
	}
	os.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources: [{group: kubeos.dev}]\n- level: None\n"), 0o600); err != nil {
		return fmt.Errorf("ctl: %w", err)
	}
	srv, err = servertest.StartWith(filepath.Join(dir, "kube"), &serverLog, func(o *server.Options) {
		o.AuditPolicyFile, o.AuditLogPath = policy, filepath.Join(dir, "audit.log")
	})
	if err != nil {
		return fmt.Errorf("ctl: start server: %w\n%s", err, serverLog.String())
	}
	fx.Cleanup(func() { srv.Stop() })
	return nil
})

// result is what one run of the binary printed and its exit status.
type result struct {
	out, err string
	code     int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
}

// ctl runs `kube ctl args...` with kubeconfig.
func ctl(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	return runBin(t, kubeBin, append([]string{"ctl", "--kubeconfig", kubeconfig}, args...)...)
}

func runBin(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "KUBECACHEDIR=" + filepath.Join(home, "cache")}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{out: o.String(), err: e.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s %v: %v", bin, args, err)
	}
	return r
}

// ok runs kube ctl and fails the test unless it exits 0.
func ok(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	r := ctl(t, kubeconfig, args...)
	if r.code != 0 {
		t.Fatalf("kube ctl %s: %s", strings.Join(args, " "), r)
	}
	return r.out
}

// kubectl runs kubectl 1.33 (PATH includes kubectl-kube).
type kubectl struct{ bin, home string }

func newKubectl(t *testing.T) kubectl {
	bin, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	return kubectl{bin: bin, home: t.TempDir()}
}

func (k kubectl) run(kubeconfig, stdin string, args ...string) (string, string, error) {
	return servertest.RunKubectl(k.bin, k.home, kubeconfig, stdin, args...)
}

func (k kubectl) ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := k.run(srv.Kubeconfig, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (k kubectl) apply(t *testing.T, yaml string) {
	t.Helper()
	k.ok(t, yaml, "apply", "-f", "-")
}

// waitPhase waits until the object's status.phase is phase.
func (k kubectl) waitPhase(t *testing.T, phase string, args ...string) {
	t.Helper()
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		out, errOut, err := k.run(srv.Kubeconfig, "", append([]string{"get", "-o", "jsonpath={.status.phase}"}, args...)...)
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		if out != phase {
			return fmt.Errorf("%v: phase %q, want %q", args, out, phase)
		}
		return nil
	})
}
