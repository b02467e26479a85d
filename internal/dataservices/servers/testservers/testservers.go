// Package testservers starts real PostgreSQL 15 and Redis 7 servers for tests (Debian's
// postgresql and redis-server), each on a free port in its own temporary directory, stopped
// and removed at cleanup even when the test fails. PostgreSQL runs as the postgres user
// (initdb refuses root).
package testservers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"kubeos.dev/kube/internal/server/servertest/slot"
)

// PostgresBin is where Debian installs PostgreSQL 15.
const PostgresBin = "/usr/lib/postgresql/15/bin"

// Admin passwords of the servers started here.
const (
	PostgresAdminPassword = "admin-pw-for-tests"
	RedisAdminPassword    = "redis-admin-pw-for-tests"
)

// TB is what the helpers need of testing.TB (TestMain has no T: use Main).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// FreePort returns a TCP port free on 127.0.0.1.
func FreePort(t TB) int {
	t.Helper()
	p, err := slot.FreePort()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return p
}

// Postgres is a running PostgreSQL.
type Postgres struct {
	// URL is the admin URL (superuser admin).
	URL  string
	Port int
	Dir  string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   sync.Mutex
	data string
}

// StartPostgres runs a fresh cluster; stopped at cleanup.
func StartPostgres(t TB) *Postgres {
	t.Helper()
	dir, err := os.MkdirTemp("", "kube-pg-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(PostgresAdminPassword+"\n"), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	p := &Postgres{Dir: dir, data: filepath.Join(dir, "data"), Port: FreePort(t)}
	if out, err := exec.Command("runuser", "-u", "postgres", "--", PostgresBin+"/initdb", "-D", p.data, "-U", "admin",
		"--pwfile="+pwfile, "--auth=scram-sha-256", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	p.URL = fmt.Sprintf("postgres://admin:%s@127.0.0.1:%d/postgres?sslmode=disable", PostgresAdminPassword, p.Port)
	t.Cleanup(p.Stop)
	if err := p.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// Start (re)starts the server and waits until it answers.
func (p *Postgres) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	cmd := exec.Command("runuser", "-u", "postgres", "--", PostgresBin+"/postgres", "-D", p.data, "-p", strconv.Itoa(p.Port),
		"-k", p.Dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "fsync=off")
	p.log = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, p.URL)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not start: %v\n%s", err, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server (immediately) and waits for it.
func (p *Postgres) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = exec.Command("runuser", "-u", "postgres", "--", PostgresBin+"/pg_ctl", "-D", p.data, "stop", "-m", "immediate").Run()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// URLFor is a URL as user with password to database.
func (p *Postgres) URLFor(user, password, database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", user, password, p.Port, database)
}

// Redis is a running redis-server.
type Redis struct {
	// URL is the admin URL (user default with RedisAdminPassword).
	URL  string
	Addr string
	Port int
	dir  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  *bytes.Buffer
}

// StartRedis runs a redis-server without persistence; stopped at cleanup.
func StartRedis(t TB) *Redis {
	t.Helper()
	dir, err := os.MkdirTemp("", "kube-redis-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &Redis{Port: FreePort(t), dir: dir}
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.Port)
	r.URL = fmt.Sprintf("redis://default:%s@%s", RedisAdminPassword, r.Addr)
	t.Cleanup(r.Stop)
	if err := r.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	return r
}

// Start (re)starts the server and waits until it answers.
func (r *Redis) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--requirepass", RedisAdminPassword)
	r.log = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd = cmd
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("redis did not start: %v\n%s", err, r.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Main adapts TestMain (no *testing.T) to TB: Fatalf panics, Cleanup runs at Close.
type Main struct {
	mu       sync.Mutex
	cleanups []func()
}

var _ TB = (*Main)(nil)

// Helper implements TB.
func (*Main) Helper() {}

// Fatalf implements TB.
func (*Main) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Cleanup implements TB.
func (m *Main) Cleanup(f func()) { m.mu.Lock(); m.cleanups = append(m.cleanups, f); m.mu.Unlock() }

// Close runs the cleanups, last first.
func (m *Main) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	m.cleanups = nil
}
