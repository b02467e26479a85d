package etcd

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTrimDatabase: a member's database file cut at bbolt's high-water mark is the same
// database (every key back after a restart, and writable), and smaller than bbolt left it.
func TestTrimDatabase(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func() *Member {
		m, err := StartMember(ctx, MemberOptions{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	cli := m.Client()
	for i := range 200 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/k/%03d", i), fmt.Sprintf("value %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cli.Close()
	m.Close()

	before, err := os.Stat(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := trimDatabase(dbPath(dir)); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() >= before.Size() {
		t.Fatalf("database file %d bytes after trimming, %d before", after.Size(), before.Size())
	}
	if err := trimDatabase(dbPath(dir)); err != nil {
		t.Fatalf("trimming again: %v", err)
	}

	m = start()
	defer m.Close()
	cli = m.Client()
	defer cli.Close()
	resp, err := cli.Get(ctx, "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 200 || string(resp.Kvs[199].Value) != "value 199" {
		t.Fatalf("after trimming and restarting: %d keys", len(resp.Kvs))
	}
	for i := range 200 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/more/%03d", i), string(make([]byte, 4096))); err != nil {
			t.Fatalf("writing after the trim: %v", err)
		}
	}
	if err := trimDatabase(dbPath(t.TempDir())); err != nil {
		t.Fatalf("no database yet: %v", err)
	}
}
