package services

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

var (
	buildOnce sync.Once
	kubeBin   string
	buildDir  string
)

// kube builds the binary once for the package's process tests.
func kube(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var err error
		if buildDir, err = os.MkdirTemp("", "kube-services-bin-"); err != nil {
			t.Fatal(err)
		}
		kubeBin = servertest.BuildKube(t, buildDir)
	})
	if kubeBin == "" {
		t.Fatal("kube binary not built")
	}
	return kubeBin
}

// proc is a `kube server` child process.
type proc struct {
	name  string
	args  []string
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   strings.Builder
	ready chan struct{}
	done  chan struct{}
	port  int
	cs    *kubernetes.Clientset
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// startServer runs `kube server` on dataDir and port with extra flags and waits until it
// is ready; a client for it is in p.cs.
func startServer(t *testing.T, name, dataDir string, port int, extra ...string) *proc {
	t.Helper()
	p := &proc{name: name, port: port, ready: make(chan struct{}), done: make(chan struct{}),
		args: append([]string{"server", "--data-dir", dataDir, "--secure-port", fmt.Sprint(port)}, extra...)}
	p.cmd = exec.Command(kube(t), p.args...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if strings.Contains(line, "Kube is ready") {
				once.Do(func() { close(p.ready) })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { _ = p.cmd.Wait(); pw.Close(); close(p.done) }()
	t.Cleanup(p.kill)
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("%s exited before it was ready:\n%s", name, p.log())
	case <-time.After(90 * time.Second):
		t.Fatalf("%s not ready within 90 s:\n%s", name, p.log())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, 0, 20*time.Second
	if p.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() { p.signal(syscall.SIGKILL) }

// stop sends SIGTERM (a graceful shutdown) and waits for the process to end.
func (p *proc) stop() { p.signal(syscall.SIGTERM) }

func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := slot.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startEtcd runs an etcd member in the test process that child servers share (a unix
// socket in its data directory).
func startEtcd(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return strings.Join(m.ClientURLs(), ",")
}
