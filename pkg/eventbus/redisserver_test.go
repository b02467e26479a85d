package eventbus

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisServer is a real redis-server owned by one test.
type redisServer struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts redis-server on a free port with its data in t.TempDir(). A machine
// without redis-server fails the test: .ci/run installs it (apt-get install redis-server).
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (apt-get install -y redis-server; .ci/run does this): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &redisServer{t: t, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) start() {
	r.t.Helper()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--save", "", "--appendonly", "no")
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.cmd = cmd
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			if !closed && containsReady(sc.Text()) {
				close(ready)
				closed = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		r.t.Fatalf("redis-server on port %d not ready within 10s", r.port)
	}
}

func containsReady(line string) bool {
	return strings.Contains(line, "Ready to accept connections")
}

// stop terminates redis-server and waits for it (its data goes with it: --save "").
func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

func (r *redisServer) String() string { return fmt.Sprintf("redis-server :%d", r.port) }
