// Package e2e holds the end-to-end tests: real clients against a real in-process kube server
// on embedded etcd. TestKubectl runs kubectl.sh once per kubectl version against one server.
//
// The kubectl binaries come with the machine's google-cloud-cli package, which ships
// kubectl.1.27 … kubectl.1.33 beside the default kubectl. Run with:
//
//	go test ./test/e2e/
//
// E2E_KUBECTL_VERSIONS (e.g. "1.27,1.30,1.33") changes the versions tested.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest"
)

// defaultVersions are the kubectl versions the suite must pass: the oldest and the newest
// the project supports.
var defaultVersions = []string{"1.27", "1.33"}

// srv is the one server every test of the package shares.
var srv *servertest.Server

// serverLog collects the server's log, shown when a test fails.
var serverLog lockedBuffer

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err = servertest.Start(dir, &serverLog)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start server: %v\n%s", err, serverLog.String())
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop server:", err)
		}
	}()
	return m.Run()
}

// TestKubectl runs kubectl.sh with each kubectl version, one after the other, against the
// shared server. Each run has its own HOME and discovery cache, so nothing one version
// caches is seen by the next.
func TestKubectl(t *testing.T) {
	versions := defaultVersions
	if s := os.Getenv("E2E_KUBECTL_VERSIONS"); s != "" {
		versions = strings.Split(s, ",")
	}
	for _, v := range versions {
		v = strings.TrimSpace(v)
		t.Run("kubectl-"+v, func(t *testing.T) {
			bin, err := findKubectl(v)
			if err != nil {
				t.Fatal(err)
			}
			runScript(t, bin)
		})
	}
}

// scriptDeadline bounds one run of kubectl.sh: about a minute on an idle machine, four at
// load 30 (a full suite beside other builds), where a 4-minute bound once cut it short.
const scriptDeadline = 10 * time.Minute

// runScript runs kubectl.sh with one kubectl binary; every output line goes to t.Log (shown
// on failure, or with -v).
func runScript(t *testing.T, kubectl string) {
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), scriptDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "kubectl.sh")
	cmd.Env = append(scriptEnv(os.Environ()),
		"KUBECTL="+kubectl,
		"KUBECONFIG="+srv.Kubeconfig,
		"HOME="+home,
		"KUBECACHEDIR="+filepath.Join(home, "kube-cache"),
		"TMPDIR="+t.TempDir(),
	)
	// Own process group: a timeout kills the script's background kubectl processes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err := cmd.Run()
	out.Flush()
	t.Logf("kubectl.sh took %s", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("kubectl.sh with %s did not finish within %s\nserver log:\n%s", kubectl, scriptDeadline, tail(serverLog.String(), 60))
	}
	if err != nil {
		t.Fatalf("kubectl.sh with %s failed: %v (its output is above)\nserver log:\n%s", kubectl, err, tail(serverLog.String(), 60))
	}
}

// scriptEnv drops what would make the script use another server, cache or editor.
func scriptEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "KUBECONFIG", "KUBECTL", "HOME", "KUBECACHEDIR", "KUBE_EDITOR", "EDITOR", "TMPDIR":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lineLogger writes each complete line to t.Log as it arrives.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Flush logs a last line without a newline.
func (l *lineLogger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(string(l.buf))
		l.buf = nil
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var findKubectl = servertest.FindKubectl

type lockedBuffer = servertest.Buffer
