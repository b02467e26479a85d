package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// Containerd supervises one containerd process for one agent.
type Containerd struct {
	// Layout is where it keeps its files.
	Layout Layout
	// Config is its configuration's choices.
	Config ConfigOptions
	// Binary is the containerd executable (default: "containerd" on PATH).
	Binary string
	// Proxy, when set, is containerd's HTTP_PROXY and HTTPS_PROXY (tests: a closed port).
	Proxy string
	// Log receives the supervisor's messages.
	Log *slog.Logger

	mu  sync.Mutex
	pid int
}

// Start writes the configuration, adopts a containerd this layout's pid file names if it
// still answers, or starts a new one, and waits until it serves CRI. A goroutine restarts
// it when it dies until ctx ends, then stops it (SIGTERM, SIGKILL after 10 s); wg tracks
// that goroutine.
func (c *Containerd) Start(ctx context.Context, wg *sync.WaitGroup) error {
	l := c.Layout
	for _, d := range []string{l.Dir, l.Root(), l.State(), l.RuncRoot(), l.CNIConfDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
	}
	if err := os.WriteFile(l.ConfigFile(), []byte(Config(l, c.Config)), 0o600); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	if pid := readPid(l.PidFile()); pid > 0 && alive(pid) && isContainerd(pid) && Ping(ctx, l.Endpoint()) == nil {
		c.Log.Info("adopting running containerd", "pid", pid)
		c.setPid(pid)
	} else if err := c.spawn(); err != nil {
		return err
	}
	if err := WaitReady(ctx, l.Endpoint(), 30*time.Second); err != nil {
		c.stop()
		return fmt.Errorf("containerd did not come up (log %s): %w", l.LogFile(), err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.supervise(ctx)
	}()
	return nil
}

func (c *Containerd) setPid(pid int) {
	c.mu.Lock()
	c.pid = pid
	c.mu.Unlock()
}

// Pid is the supervised containerd's pid (0 when none).
func (c *Containerd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}

func (c *Containerd) spawn() error {
	bin := c.Binary
	if bin == "" {
		bin = "containerd"
	}
	logf, err := os.OpenFile(c.Layout.LogFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	defer logf.Close()
	_ = os.Remove(c.Layout.Socket())
	cmd := exec.Command(bin, "--config", c.Layout.ConfigFile())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = containerdEnv(os.Environ(), c.Proxy)
	// Its own process group: a terminal's ^C or a kill of the agent's group leaves it (and
	// so the pods) running; the agent stops it itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("containerd: start %s: %w", bin, err)
	}
	pid := cmd.Process.Pid
	// Reap it when it exits (the supervisor watches the pid).
	go func() { _ = cmd.Wait() }()
	c.setPid(pid)
	if err := os.WriteFile(c.Layout.PidFile(), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	c.Log.Info("started containerd", "pid", pid, "config", c.Layout.ConfigFile())
	return nil
}

// containerdEnv is env with the proxy variables replaced by proxy (when set). Pure.
func containerdEnv(env []string, proxy string) []string {
	if proxy == "" {
		return env
	}
	out := make([]string, 0, len(env)+4)
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY":
			continue
		}
		out = append(out, e)
	}
	return append(out, "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "NO_PROXY=")
}

func (c *Containerd) supervise(ctx context.Context) {
	delay := time.Second
	for {
		select {
		case <-ctx.Done():
			c.stop()
			return
		case <-time.After(time.Second):
		}
		if pid := c.Pid(); pid > 0 && alive(pid) {
			continue
		}
		c.Log.Warn("containerd exited; restarting", "log", c.Layout.LogFile())
		if err := c.spawn(); err != nil {
			c.Log.Error("containerd restart", "err", err)
		} else if err := WaitReady(ctx, c.Layout.Endpoint(), 30*time.Second); err != nil {
			c.Log.Error("containerd restart", "err", err)
		} else {
			delay = time.Second
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// stop ends containerd: SIGTERM, SIGKILL after 10 s. Containers keep running in their
// shims, as when containerd is restarted by systemd.
func (c *Containerd) stop() {
	pid := c.Pid()
	if pid <= 0 || !alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.Remove(c.Layout.PidFile())
	c.setPid(0)
	c.Log.Info("stopped containerd", "pid", pid)
}

func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after the parenthesised command
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func isContainerd(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "containerd")
}

// Ping asks the CRI endpoint for its version once.
func Ping(ctx context.Context, endpoint string) error {
	rs, err := remote.NewRemoteRuntimeService(ctx, endpoint, 2*time.Second, nil, false)
	if err != nil {
		return err
	}
	defer rs.Close(ctx)
	_, err = rs.Version(ctx, "v1")
	return err
}

// WaitReady polls endpoint until it answers CRI Version or timeout passes.
func WaitReady(ctx context.Context, endpoint string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	socket := strings.TrimPrefix(endpoint, "unix://")
	for time.Now().Before(deadline) {
		if _, serr := os.Stat(socket); serr != nil && strings.HasPrefix(endpoint, "unix://") {
			err = serr
		} else if err = Ping(ctx, endpoint); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err == nil {
		err = errors.New("timed out")
	}
	return err
}

// Services are the two CRI clients of one endpoint.
type Services struct {
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
}

// requestTimeout bounds each CRI call: the kubelet's --runtime-request-timeout default.
// (It was 10 s, less than RunPodSandbox took for 30 pods at once on this 2-core machine
// under load: bench/agent/crifloor saw DeadlineExceeded; the pod worker then retried.)
const requestTimeout = 2 * time.Minute

// Connect opens the CRI runtime and image services of endpoint.
func Connect(ctx context.Context, endpoint string) (*Services, error) {
	rs, err := remote.NewRemoteRuntimeService(ctx, endpoint, requestTimeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("cri runtime %s: %w", endpoint, err)
	}
	is, err := remote.NewRemoteImageService(ctx, endpoint, requestTimeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("cri images %s: %w", endpoint, err)
	}
	return &Services{Runtime: rs, Images: is}, nil
}
