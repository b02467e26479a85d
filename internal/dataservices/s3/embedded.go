package s3

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EmbeddedOptions configure the embedded store.
type EmbeddedOptions struct {
	// Dir holds the objects (Dir/data), versions, IAM accounts and the root key.
	Dir string
	// Host is the listen address, 127.0.0.1 unless set.
	Host string
	// Port is the S3 port; 0 picks a free one.
	Port int
	// Region is reported to clients, us-east-1 unless set.
	Region string
	// Log receives the gateway's output.
	Log *slog.Logger
}

// Embedded is versitygw run as a child process of this binary.
type Embedded struct {
	o              EmbeddedOptions
	access, secret string
	addr           string

	ready    chan struct{}
	readyErr error
	once     sync.Once

	mu  sync.Mutex
	pid int
}

// NewEmbedded prepares the store: it creates Dir and reads (or generates and keeps) the root
// key. Nothing runs until Start.
func NewEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded s3: no directory")
	}
	if !filepath.IsAbs(o.Dir) {
		abs, err := filepath.Abs(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("embedded s3: %w", err)
		}
		o.Dir = abs
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded s3: %w", err)
	}
	access, secret, err := rootKey(filepath.Join(o.Dir, "root-key"))
	if err != nil {
		return nil, fmt.Errorf("embedded s3: %w", err)
	}
	return &Embedded{o: o, access: access, secret: secret, ready: make(chan struct{})}, nil
}

func rootKey(path string) (access, secret string, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if a, s, ok := strings.Cut(strings.TrimSpace(string(b)), ":"); ok && a != "" && s != "" {
			return a, s, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	access, secret = "kubeadmin"+RandomString(6), RandomString(20)
	if err := os.WriteFile(path, []byte(access+":"+secret+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return access, secret, nil
}

// RandomString is n random bytes, hex.
func RandomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// Start runs the store until ctx ends; a child that dies is started again (with back-off).
// Ready tells when it first answers.
func (e *Embedded) Start(ctx context.Context) error {
	port := e.o.Port
	if port == 0 {
		p, err := freePort(e.o.Host)
		if err != nil {
			e.once.Do(func() { e.readyErr = err; close(e.ready) })
			return err
		}
		port = p
	}
	e.addr = net.JoinHostPort(e.o.Host, strconv.Itoa(port))
	backoff := time.Second
	for {
		started := time.Now()
		err := e.runChild(ctx)
		if ctx.Err() != nil {
			e.once.Do(func() { e.readyErr = ctx.Err(); close(e.ready) })
			return nil
		}
		e.o.Log.Error("embedded s3: gateway exited; restarting", "err", err, "backoff", backoff)
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			e.once.Do(func() { e.readyErr = ctx.Err(); close(e.ready) })
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("embedded s3: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runChild starts the child and waits for it; the OS thread that forks stays locked while it
// runs, so that Pdeathsig (sent when that thread ends) fires only when this process ends.
func (e *Embedded) runChild(ctx context.Context) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start gateway: %w", err)
	}
	e.mu.Lock()
	e.pid = cmd.Process.Pid
	e.mu.Unlock()
	go e.logLines(out)
	cfg, _ := json.Marshal(childConfig{Dir: e.o.Dir, Addr: e.addr, Region: e.o.Region, AccessKey: e.access, SecretKey: e.secret})
	if _, err := stdin.Write(append(cfg, '\n')); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("configure gateway: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	go e.waitHealthy(ctx, waited)
	select {
	case err := <-waited:
		return fmt.Errorf("gateway: %w", err)
	case <-ctx.Done():
		_ = stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
		return ctx.Err()
	}
}

func (e *Embedded) logLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			e.o.Log.Info("embedded s3: " + line)
		}
	}
}

func (e *Embedded) waitHealthy(ctx context.Context, exited <-chan error) {
	c := http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get(e.Endpoint() + healthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				e.once.Do(func() { close(e.ready) })
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		if len(exited) > 0 {
			return
		}
	}
}

// Ready is closed once the store first answers (or Start gave up: see Err).
func (e *Embedded) Ready() <-chan struct{} { return e.ready }

// Err is why the store did not become ready, after Ready is closed.
func (e *Embedded) Err() error { <-e.ready; return e.readyErr }

// Endpoint is the S3 endpoint (http://host:port).
func (e *Embedded) Endpoint() string { return "http://" + e.addr }

// RootKey is the admin access key and secret.
func (e *Embedded) RootKey() (access, secret string) { return e.access, e.secret }

// Region is the region the store reports.
func (e *Embedded) Region() string { return e.o.Region }

// PID is the running child's process id (for measurements), 0 before the first start.
func (e *Embedded) PID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid
}
