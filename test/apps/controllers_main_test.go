package apps

// The controllers suite tests the built-in controllers end to end, as a user would check
// them: kubectl 1.33 against its own in-process kube server on embedded etcd — garbage
// collection with each propagation policy (kubectl delete --cascade=...), dangling and
// invalid ownerReferences, custom resources, and namespace deletion with its conditions.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

var (
	controllersSrv     *servertest.Server
	serverLog          lockedBuffer
	controllersKubectl string
	home               string
)

var controllersSuite = servertest.NewFixture("controllers", func(fx *servertest.Fixture) error {
	var err error
	if controllersKubectl, err = findKubectl("1.33"); err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	dir, err := servertest.TempDir()
	if err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	home = filepath.Join(dir, "home")
	controllersSrv, err = servertest.Start(filepath.Join(dir, "server"), &serverLog)
	if err != nil {
		return fmt.Errorf("controllers: start server: %w\n%s", err, serverLog.String())
	}
	fx.Cleanup(func() { controllersSrv.Stop() })
	return nil
})

// controllersClientset is an admin client for setting up many objects quickly.
func controllersClientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg, err := controllersSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// k runs kubectl and returns its trimmed stdout; a failure fails the test.
func k(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kTry(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s\nserver log:\n%s", strings.Join(args, " "), err, out, tail(serverLog.String(), 30))
	}
	return out
}

// kIn is k with stdin.
func kIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kRun(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func kTry(args ...string) (string, error) { return kRun("", args...) }

func kRun(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, controllersKubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+controllersSrv.Kubeconfig, "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "cache"))
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return strings.TrimSpace(stdout.String() + "\n" + stderr.String()), err
	}
	return strings.TrimSpace(stdout.String()), nil
}

// controllersEventually polls cond until it holds or timeout passes; msg describes the last state.
func controllersEventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last state: %s\nserver log:\n%s", what, timeout, last, tail(serverLog.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var findKubectl = servertest.FindKubectl

type lockedBuffer = servertest.Buffer
