package kubeproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// FindKubectl finds kubectl.<version> (e.g. "1.27"): on PATH, or beside the kubectl that PATH
// finds (the google-cloud-cli package puts kubectl.1.27 … kubectl.1.33 there). Tests fail,
// never skip, when it is missing.
func FindKubectl(version string) (string, error) {
	name := "kubectl." + version
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	def, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("%s not found: no kubectl on PATH; install the google-cloud-cli package, which ships kubectl.1.27 … kubectl.1.33", name)
	}
	resolved, err := filepath.EvalSymlinks(def)
	if err != nil {
		return "", fmt.Errorf("%s not found: %v", name, err)
	}
	p := filepath.Join(filepath.Dir(resolved), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found on PATH nor beside %s (%v); install the google-cloud-cli package, which ships kubectl.1.27 … kubectl.1.33", name, resolved, err)
	}
	return p, nil
}

// Buffer is a bytes.Buffer safe for concurrent writes (a server's log).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// RunKubectl runs the kubectl binary bin with its own HOME and discovery cache under home,
// the given kubeconfig and stdin, and returns what it printed. It gives up after a minute.
func RunKubectl(bin, home, kubeconfig, stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + kubeconfig, "PATH=" + os.Getenv("PATH"), "KUBECACHEDIR=" + filepath.Join(home, "cache")}
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// Eventually retries f every interval until it returns nil, and fails the test with f's
// last error once d has passed (a deadline for conditions that follow writes shortly, such
// as informer caches and RBAC snapshots; not a measurement).
func Eventually(t testing.TB, d, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", d, err)
		}
		time.Sleep(interval)
	}
}

// BuildKube returns the path of a kube binary built from this module, for tests that run it
// as a user does (signals, listening sockets, several processes). The binary is the go
// command's cached executable (`go run` caches what it links, keyed by the sources), so the
// many test packages that need one link it once between them instead of once each; dir is
// unused and kept for callers. The binary must not be modified.
func BuildKube(t testing.TB, dir string) string {
	t.Helper()
	bin, err := KubeBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var kubeBinary = sync.OnceValues(func() (string, error) {
	// The first link of a package leaves its executable in a temporary directory that go run
	// removes; once it is in the cache, a second go run names the cached file.
	for range 2 {
		out, err := exec.Command("go", "run", "-ldflags=-s -w", "-exec", "/bin/echo", "kubeos.dev/kube/cmd/kube").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go run kubeos.dev/kube/cmd/kube: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		bin := lines[len(lines)-1]
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	// The sources changed between the two runs (someone edits the checkout while tests
	// run): link one of this process's own.
	dir, err := os.MkdirTemp("", "kube-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kube")
	if out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "kubeos.dev/kube/cmd/kube").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build kubeos.dev/kube/cmd/kube: %v\n%s", err, out)
	}
	return bin, nil
})

// KubeBinary is BuildKube for code without a testing.TB (TestMain).
func KubeBinary() (string, error) { return kubeBinary() }

// TempDir makes a directory for a server outside of any single test's lifetime (TestMain).
func TempDir() (string, error) { return os.MkdirTemp("", "kube-test-") }
