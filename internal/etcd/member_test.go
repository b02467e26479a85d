package etcd

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kubeos.dev/kube/internal/localuser"
)

// TestDefaultMemberPrivate: a member with default URLs listens on no TCP port, for peers or
// clients; its clients reach it through a unix socket that only its user can open (0600 in
// the 0700 data directory, even one made 0755 beforehand); Kube's in-process client and a
// client of the same user on the socket both read and write.
func TestDefaultMemberPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	m, closeMember := startDefaultMember(t, ctx, dir)

	if len(m.e.Peers) != 0 {
		t.Errorf("%d peer listeners, want none: %v", len(m.e.Peers), m.e.Peers[0].Addr())
	}
	for _, l := range m.e.Clients {
		if a := l.Addr(); a.Network() != "unix" {
			t.Errorf("client listener on %s %s, want unix sockets only", a.Network(), a)
		}
	}
	urls := m.ClientURLs()
	sock := filepath.Join(dir, "client.sock")
	if len(urls) != 1 || urls[0] != "unix://"+sock {
		t.Fatalf("ClientURLs = %v, want [unix://%s]", urls, sock)
	}
	localuser.AssertMode(t, dir, os.ModeDir|0o700)
	localuser.AssertMode(t, sock, os.ModeSocket|0o600)

	in := m.Client()
	defer in.Close()
	if _, err := in.Put(ctx, "/registry/core/secrets/ns/s", "in-process"); err != nil {
		t.Fatal(err)
	}
	cli, err := NewClient(ClientOptions{Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/registry/core/secrets/ns/s")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "in-process" {
		t.Fatalf("through the socket: %v", resp.Kvs)
	}
	if _, err := cli.Put(ctx, "/registry/core/secrets/ns/s", "socket"); err != nil {
		t.Fatal(err)
	}
	if resp, err := in.Get(ctx, "/registry/core/secrets/ns/s"); err != nil || string(resp.Kvs[0].Value) != "socket" {
		t.Fatalf("in-process after a write through the socket: %v %v", resp, err)
	}

	// The member's membership advertises no TCP address either.
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, mem := range ml.Members {
		for _, u := range append(mem.PeerURLs, mem.ClientURLs...) {
			if pu, err := url.Parse(u); err != nil || pu.Scheme != "unix" {
				t.Errorf("member %s advertises %s, want unix URLs only", mem.Name, u)
			}
		}
	}

	// Another user may not connect (checked where the test can act as one: as root on Linux).
	if tried, err := localuser.DialAsNobody(sock); !tried {
		t.Log("not root on Linux: did not try to connect as another user")
	} else if !errors.Is(err, syscall.EACCES) {
		t.Errorf("another user connecting to %s: %v, want permission denied", sock, err)
	}

	// A second member on the same data directory is refused and leaves the socket alone.
	if m2, err := StartMember(ctx, MemberOptions{DataDir: dir}); err == nil {
		m2.Close()
		t.Fatal("a second member started on a data directory in use")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("second member: %v, want an in-use error", err)
	}
	if _, err := cli.Get(ctx, "/registry/core/secrets/ns/s"); err != nil {
		t.Fatalf("socket after the refused second member: %v", err)
	}

	closeMember()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
}

// TestDefaultMemberLongPath: a data directory too deep for a socket address gets its socket
// in a private temporary directory, removed with the member.
func TestDefaultMemberLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	m, closeMember := startDefaultMember(t, ctx, dir)
	urls := m.ClientURLs()
	if len(urls) != 1 || !strings.HasPrefix(urls[0], "unix://") {
		t.Fatalf("ClientURLs = %v, want one unix socket", urls)
	}
	sock := strings.TrimPrefix(urls[0], "unix://")
	if len(sock) > maxSocketPath || strings.HasPrefix(sock, dir) {
		t.Fatalf("socket %s: want a short path outside %s", sock, dir)
	}
	localuser.AssertMode(t, filepath.Dir(sock), os.ModeDir|0o700)
	localuser.AssertMode(t, sock, os.ModeSocket|0o600)
	cli, err := NewClient(ClientOptions{Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	closeMember()
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Errorf("socket directory left after Close: %v", err)
	}
}

// TestMemberUpgradeFromTCP: a data directory whose member was started on loopback TCP URLs
// (Kube before the socket, or an explicit configuration) restarts as a default member with
// its data; explicit URLs still serve plain TCP where they say.
func TestMemberUpgradeFromTCP(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ports := freeLoopbackPorts(t, 2)
	m, err := StartMember(ctx, MemberOptions{Name: "kube", DataDir: dir,
		ClientURLs: []string{"http://" + ports[0]}, PeerURLs: []string{"http://" + ports[1]}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ClientURLs(); len(got) != 1 || got[0] != "http://"+ports[0] {
		t.Errorf("explicit ClientURLs = %v, want [http://%s]", got, ports[0])
	}
	cli, err := NewClient(ClientOptions{Endpoints: m.ClientURLs()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	m.Close()

	m, err = StartMember(ctx, MemberOptions{Name: "kube", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := m.Client()
	defer in.Close()
	resp, err := in.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "before" {
		t.Fatalf("after the restart: %v %v", resp, err)
	}
	for _, addr := range ports {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 300 * time.Millisecond})
		if err != nil {
			continue
		}
		cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = c.Get(cctx, "k")
		ccancel()
		c.Close()
		if err == nil {
			t.Errorf("the restarted default member still answers on %s", addr)
		}
	}
}

func TestMemberInitialClusterNeedsPeerURLs(t *testing.T) {
	_, err := StartMember(t.Context(), MemberOptions{DataDir: t.TempDir(), InitialCluster: "a=http://127.0.0.1:2380"})
	if err == nil || !strings.Contains(err.Error(), "peer URLs are required") {
		t.Fatalf("err = %v, want peer URLs required", err)
	}
}

func freeLoopbackPorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// startDefaultMember starts a default member on dir; the returned close stops it once (the
// test's cleanup does, if the test has not).
func startDefaultMember(t *testing.T, ctx context.Context, dir string) (*Member, func()) {
	t.Helper()
	m, err := StartMember(ctx, MemberOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeMember := func() { once.Do(m.Close) }
	t.Cleanup(closeMember)
	return m, closeMember
}
