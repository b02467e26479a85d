package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"kubeos.dev/kube/internal/dataservices/nats"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

func freePort(t *testing.T) int {
	t.Helper()
	p, err := slot.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after 60s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startRedis runs redis-server on a free port with an admin password; stopped at cleanup.
func startRedis(t *testing.T) string {
	port := freePort(t)
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir(), "--requirepass", "adminpw")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	u := fmt.Sprintf("redis://default:adminpw@127.0.0.1:%d", port)
	opt, _ := redis.ParseURL(u)
	c := redis.NewClient(opt)
	defer c.Close()
	waitFor(t, "redis", func() bool { return c.Ping(context.Background()).Err() == nil })
	return u
}

// startPostgres runs a PostgreSQL 15 cluster as the postgres user (the tests run as root) on
// a free port; stopped at cleanup.
func startPostgres(t *testing.T) string {
	bin := "/usr/lib/postgresql/15/bin"
	dir, err := os.MkdirTemp("", "kube-backup-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte("adminpw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	if out, err := exec.Command("runuser", "-u", "postgres", "--", bin+"/initdb", "-D", data, "-U", "admin",
		"--pwfile="+pwfile, "--auth=scram-sha-256", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	port := freePort(t)
	cmd := exec.Command("runuser", "-u", "postgres", "--", bin+"/postgres", "-D", data, "-p", strconv.Itoa(port),
		"-k", dir, "-c", "listen_addresses=127.0.0.1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("runuser", "-u", "postgres", "--", bin+"/pg_ctl", "-D", data, "stop", "-m", "immediate").Run()
		_ = cmd.Wait()
	})
	u := fmt.Sprintf("postgres://admin:adminpw@127.0.0.1:%d/postgres?sslmode=disable", port)
	waitFor(t, "postgres", func() bool { _, err := psql(u, "postgres", "select 1"); return err == nil })
	return u
}

func psql(adminURL, db, sql string) (string, error) {
	env, err := pgEnv(adminURL, db)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = run(context.Background(), env, nil, &out, "psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql)
	return strings.TrimSpace(out.String()), err
}

func TestPostgresRoundTrip(t *testing.T) {
	ctx := context.Background()
	u := startPostgres(t)
	for _, sql := range []string{"CREATE ROLE app LOGIN", "CREATE DATABASE orders OWNER app", "CREATE ROLE app2 LOGIN", "CREATE DATABASE orders2 OWNER app2"} {
		if _, err := psql(u, "postgres", sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := psql(u, "orders", "SET ROLE app; CREATE TABLE t (id int, v text); INSERT INTO t SELECT g, 'row'||g FROM generate_series(1,100) g"); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := DumpPostgres(ctx, u, "orders", &archive); err != nil {
		t.Fatal(err)
	}
	if !IsPostgresArchive(archive.Bytes()) {
		t.Fatalf("not a custom archive: %q", archive.Bytes()[:min(16, archive.Len())])
	}
	if err := RestorePostgres(ctx, u, "orders2", "app2", bytes.NewReader(archive.Bytes())); err != nil {
		t.Fatal(err)
	}
	got, err := psql(u, "orders2", "SELECT count(*), max(v), (SELECT tableowner FROM pg_tables WHERE tablename='t') FROM t")
	if err != nil || got != "100|row99|app2" {
		t.Fatalf("restored = %q, %v", got, err)
	}
	// A failing tool reports its stderr.
	err = DumpPostgres(ctx, u, "nosuchdb", &bytes.Buffer{})
	var te *ToolError
	if !errors.As(err, &te) || !strings.Contains(te.Stderr, "nosuchdb") {
		t.Errorf("dump of a missing database = %v", err)
	}
}

func TestRedisRoundTrip(t *testing.T) {
	ctx := context.Background()
	u := startRedis(t)
	opt, _ := redis.ParseURL(u)
	c := redis.NewClient(opt)
	defer c.Close()
	c.Set(ctx, "ns.cache:a", "1", 0)
	c.Set(ctx, "ns.cache:b", "2", time.Hour)
	c.RPush(ctx, "ns.cache:list", "x", "y")
	c.Set(ctx, "ns.other:a", "not mine", 0)
	c.Set(ctx, "ns.cache*x", "glob char is not a wildcard", 0)
	var archive bytes.Buffer
	n, err := DumpRedis(ctx, u, "ns.cache:", &archive)
	if err != nil || n != 3 {
		t.Fatalf("DumpRedis = %d, %v", n, err)
	}
	n, err = RestoreRedis(ctx, u, "ns.copy:", bytes.NewReader(archive.Bytes()))
	if err != nil || n != 3 {
		t.Fatalf("RestoreRedis = %d, %v", n, err)
	}
	if v := c.Get(ctx, "ns.copy:a").Val(); v != "1" {
		t.Errorf("a = %q", v)
	}
	if ttl := c.PTTL(ctx, "ns.copy:b").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("b's TTL = %v", ttl)
	}
	if l := c.LRange(ctx, "ns.copy:list", 0, -1).Val(); strings.Join(l, ",") != "x,y" {
		t.Errorf("list = %v", l)
	}
	c.Del(ctx, "ns.cache:a", "ns.cache:b", "ns.cache:list")
	if n, err := RestoreRedis(ctx, u, "", bytes.NewReader(archive.Bytes())); err != nil || n != 3 || c.Get(ctx, "ns.cache:a").Val() != "1" {
		t.Errorf("restore in place = %d, %v", n, err)
	}
	if _, err := RestoreStream(ctx, "nats://127.0.0.1:1", "x", bytes.NewReader(archive.Bytes()), func(context.Context) error { return nil }); err == nil {
		t.Error("a Redis archive restored as a stream")
	}
}

func TestStreamRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := nats.NewEmbedded(nats.EmbeddedOptions{Dir: t.TempDir(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Start(runCtx) }()
	defer func() { stop(); <-done }()
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	c, err := nats.Dial(ctx, e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EnsureStream(ctx, nats.StreamSpec{Name: "s1", Subjects: []string{"acme.s1.>"}}); err != nil {
		t.Fatal(err)
	}
	js := c.JetStream()
	for i := range 50 {
		if _, err := js.Publish(ctx, "acme.s1.m"+strconv.Itoa(i%3), []byte("msg"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	// A durable consumer: only the server's snapshot brings it back.
	if _, err := js.CreateOrUpdateConsumer(ctx, "s1", jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	n, err := DumpStream(ctx, e.URL(), "s1", &archive)
	if err != nil || n != 50 {
		t.Fatalf("DumpStream = %d, %v", n, err)
	}
	if !bytes.HasPrefix(archive.Bytes(), []byte(streamMagic)) {
		t.Fatalf("archive starts %q", archive.Bytes()[:8])
	}
	if err := c.DeleteStream(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	ensure := func(name, subject string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.EnsureStream(ctx, nats.StreamSpec{Name: name, Subjects: []string{subject}})
			return err
		}
	}
	// Under its own name, gone: the server restores its snapshot, consumer included.
	if n, err := RestoreStream(ctx, e.URL(), "s1", bytes.NewReader(archive.Bytes()), ensure("s1", "acme.s1.>")); err != nil || n != 50 {
		t.Fatalf("RestoreStream = %d, %v", n, err)
	}
	st, err := c.StreamInfo(ctx, "s1")
	if err != nil || st.Messages != 50 || st.Consumers != 1 {
		t.Fatalf("after restore: %+v, %v", st, err)
	}
	s, _ := js.Stream(ctx, "s1")
	m, err := s.GetMsg(ctx, 50)
	if err != nil || string(m.Data) != "msg49" || m.Subject != "acme.s1.m1" || len(m.Header) != 0 {
		t.Fatalf("last message = %+v, %v", m, err)
	}
	if _, err := s.Consumer(ctx, "reader"); err != nil {
		t.Errorf("the durable consumer did not come back: %v", err)
	}
	// Under its own name while it exists: the messages are published again.
	if n, err := RestoreStream(ctx, e.URL(), "s1", bytes.NewReader(archive.Bytes()), ensure("s1", "acme.s1.>")); err != nil || n != 50 {
		t.Fatalf("RestoreStream over an existing stream = %d, %v", n, err)
	}
	if st, _ := c.StreamInfo(ctx, "s1"); st.Messages != 100 {
		t.Errorf("after a restore over it: %d messages", st.Messages)
	}
	// Into a stream of another name and subjects: the export, mapped.
	if n, err := RestoreStream(ctx, e.URL(), "s2", bytes.NewReader(archive.Bytes()), ensure("s2", "acme.s2.>")); err != nil || n != 50 {
		t.Fatalf("RestoreStream to s2 = %d, %v", n, err)
	}
	s2, _ := js.Stream(ctx, "s2")
	if m, err := s2.GetMsg(ctx, 1); err != nil || m.Subject != "acme.s2.m0" {
		t.Fatalf("first mapped message = %+v, %v", m, err)
	}
	// A truncated archive fails, and says so.
	if _, err := RestoreStream(ctx, e.URL(), "s3", bytes.NewReader(archive.Bytes()[:len(streamMagic)+20]), ensure("s3", "acme.s3.>")); err == nil {
		t.Error("a truncated archive restored")
	}
	// A memory stream: no snapshot, the export alone.
	if _, err := c.EnsureStream(ctx, nats.StreamSpec{Name: "mem", Subjects: []string{"acme.mem.>"}, Storage: "Memory"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, "acme.mem.x", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var memArchive bytes.Buffer
	if n, err := DumpStream(ctx, e.URL(), "mem", &memArchive); err != nil || n != 5 {
		t.Fatalf("DumpStream of a memory stream = %d, %v", n, err)
	}
	if err := c.DeleteStream(ctx, "mem"); err != nil {
		t.Fatal(err)
	}
	if n, err := RestoreStream(ctx, e.URL(), "mem", bytes.NewReader(memArchive.Bytes()), func(ctx context.Context) error {
		_, err := c.EnsureStream(ctx, nats.StreamSpec{Name: "mem", Subjects: []string{"acme.mem.>"}, Storage: "Memory"})
		return err
	}); err != nil || n != 5 {
		t.Fatalf("RestoreStream of a memory stream = %d, %v", n, err)
	}
	// A version 1 archive (the export alone) still restores.
	var v1 bytes.Buffer
	if _, err := exportStream(ctx, c, "s2", []string{"acme.s2.>"}, 50, &v1); err != nil {
		t.Fatal(err)
	}
	if n, err := RestoreStream(ctx, e.URL(), "s4", bytes.NewReader(v1.Bytes()), ensure("s4", "acme.s4.>")); err != nil || n != 50 {
		t.Fatalf("RestoreStream of a version 1 archive = %d, %v", n, err)
	}
	// An empty stream dumps to a header only.
	if _, err := c.EnsureStream(ctx, nats.StreamSpec{Name: "empty", Subjects: []string{"acme.e"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := DumpStream(ctx, e.URL(), "empty", &bytes.Buffer{}); err != nil || n != 0 {
		t.Errorf("empty dump = %d, %v", n, err)
	}
}
