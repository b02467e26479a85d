package etcd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// MemberOptions configures one etcd member. Zero values mean: a single-member cluster named
// "default" that no other process can reach over the network (see ClientURLs and PeerURLs).
//
// etcd has no access control of its own here: whoever reaches a client URL reads and writes
// every object, secrets included, past the API server's authentication, RBAC, admission and
// audit. So the default member is reachable only through a unix socket in its data directory
// (mode 0700, socket 0600), i.e. by its own user; Kube's server does not even use that socket
// (Member.Client is in-process). Explicit ClientURLs and PeerURLs (`kube etcd`, members of a
// cluster shared by several servers) listen where they say, in plain http (these options
// carry no TLS settings): protecting them (a private network, a firewall, a TLS proxy with
// client certificates) is the operator's job.
type MemberOptions struct {
	// Name is the member name; it must match an entry of InitialCluster when that is set.
	Name string
	// DataDir holds the member's WAL and database. Required.
	DataDir string
	// ClientURLs the member listens on for clients, e.g. http://127.0.0.1:2379. Empty: the
	// unix socket DataDir/client.sock (Member.ClientURLs names it; a path too long for a
	// socket address moves to a fresh 0700 directory under os.TempDir()).
	ClientURLs []string
	// PeerURLs the member listens on for other members. Empty: none, for a member alone (no
	// InitialCluster), since no peer will ever dial it; etcd's membership still records a
	// peer URL, unix://DataDir/peer.sock, on which nothing listens.
	PeerURLs []string
	// InitialCluster is "name=peerURL,..."; empty means a cluster of this member alone.
	// Setting it requires PeerURLs.
	InitialCluster string
	// ClusterToken separates clusters that share peers' addresses.
	ClusterToken string
	// ProgressNotifyInterval is how often idle watches get progress notifications.
	ProgressNotifyInterval time.Duration
	// UnsafeNoFsync turns off fsync: only for benchmarks that compare with a peer doing the same.
	UnsafeNoFsync bool
	// HeartbeatInterval and ElectionTimeout tune raft; zero keeps etcd's defaults (100 ms and
	// 1 s). A member alone on loopback can use much shorter ones and start faster.
	HeartbeatInterval, ElectionTimeout time.Duration
	// LogLevel of etcd's own logger (debug, info, warn, error). Default: error.
	LogLevel string
	// SnapshotCatchUpEntries is how many applied raft entries the member keeps in memory for
	// a slow follower (older ones are compacted away; a follower further behind is sent a
	// snapshot). Default 1,000 (etcd's own default, 5,000, held ~25 MB after a burst of
	// large writes such as thousands of CRDs).
	SnapshotCatchUpEntries uint64
}

func (o *MemberOptions) complete() error {
	if o.DataDir == "" {
		return errors.New("etcd member: data directory is required")
	}
	if o.Name == "" {
		o.Name = "default"
	}
	if len(o.PeerURLs) == 0 && o.InitialCluster != "" {
		return errors.New("etcd member: peer URLs are required to join a cluster (initial cluster given)")
	}
	if o.ClusterToken == "" {
		o.ClusterToken = "kube-etcd"
	}
	if o.ProgressNotifyInterval == 0 {
		o.ProgressNotifyInterval = 5 * time.Second
	}
	if o.LogLevel == "" {
		o.LogLevel = "error"
	}
	if o.SnapshotCatchUpEntries == 0 {
		o.SnapshotCatchUpEntries = DefaultSnapshotCatchUpEntries
	}
	return nil
}

// DefaultSnapshotCatchUpEntries is MemberOptions.SnapshotCatchUpEntries' default.
const DefaultSnapshotCatchUpEntries = 1000

// Member is a running etcd member.
type Member struct {
	e          *embed.Etcd
	clientURLs []string
	// sockDir is the directory StartMember made for the client socket when DataDir's path
	// was too long for one; Close removes it.
	sockDir string
}

// Client returns an in-process client of the member: its calls go straight to the member's
// server (no gRPC, no HTTP/2, no loopback socket), which saves about a tenth of a Kube
// server's CPU on writes. Close it before the member.
func (m *Member) Client() *clientv3.Client { return v3client.New(m.e.Server) }

// StartMember starts an etcd member and waits until it serves (it has joined a quorum), or
// until ctx ends.
func StartMember(ctx context.Context, o MemberOptions) (_ *Member, err error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	m := &Member{}
	defer func() {
		if err != nil && m.sockDir != "" {
			os.RemoveAll(m.sockDir)
		}
	}()
	cfg := embed.NewConfig()
	cfg.Name = o.Name
	cfg.Dir = o.DataDir
	cfg.LogLevel = o.LogLevel
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{embed.StdErrLogOutput}
	lg, err := newLogger(o.LogLevel)
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.UnsafeNoFsync = o.UnsafeNoFsync
	cfg.WatchProgressNotifyInterval = o.ProgressNotifyInterval
	cfg.InitialClusterToken = o.ClusterToken
	cfg.MaxRequestBytes = 2 * 1024 * 1024
	cfg.SnapshotCatchUpEntries = o.SnapshotCatchUpEntries
	if o.HeartbeatInterval > 0 {
		cfg.TickMs = uint(o.HeartbeatInterval / time.Millisecond)
	}
	if o.ElectionTimeout > 0 {
		cfg.ElectionMs = uint(o.ElectionTimeout / time.Millisecond)
	}
	// Compaction belongs to the store (it knows what history the watch caches need).
	cfg.AutoCompactionRetention = "0"
	if len(o.ClientURLs) == 0 {
		if err := privateDir(o.DataDir); err != nil {
			return nil, err
		}
		var sock string
		if sock, m.sockDir, err = clientSocket(o.DataDir); err != nil {
			return nil, err
		}
		cfg.ListenClientUrls = []url.URL{{Scheme: "unix", Path: sock}}
	} else if cfg.ListenClientUrls, err = parseURLs(o.ClientURLs); err != nil {
		return nil, fmt.Errorf("etcd client URLs: %w", err)
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if len(o.PeerURLs) == 0 {
		// A member alone: no listener, since no peer will ever dial it. etcd still wants a
		// peer URL for its membership (the member's identity): a path in the data directory
		// names it without pointing at any address.
		dir, err := filepath.Abs(o.DataDir)
		if err != nil {
			return nil, fmt.Errorf("etcd data directory: %w", err)
		}
		cfg.ListenPeerUrls = nil
		cfg.AdvertisePeerUrls = []url.URL{{Scheme: "unix", Path: filepath.Join(dir, "peer.sock")}}
	} else {
		if cfg.ListenPeerUrls, err = parseURLs(o.PeerURLs); err != nil {
			return nil, fmt.Errorf("etcd peer URLs: %w", err)
		}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	}
	cfg.InitialCluster = o.InitialCluster
	if cfg.InitialCluster == "" {
		parts := make([]string, len(cfg.AdvertisePeerUrls))
		for i, u := range cfg.AdvertisePeerUrls {
			parts[i] = o.Name + "=" + u.String()
		}
		cfg.InitialCluster = strings.Join(parts, ",")
	}
	if err := trimDatabase(dbPath(o.DataDir)); err != nil {
		// Only memory is at stake: etcd reports a database it cannot open itself.
		lg.Warn("could not trim the etcd database file", zap.Error(err))
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd member %q: %w", o.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd member %q: %w", o.Name, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcd member %q not ready: %w", o.Name, ctx.Err())
	}
	m.e = e
	m.clientURLs = make([]string, len(e.Clients))
	for i, l := range e.Clients {
		a := l.Addr()
		if a.Network() != "unix" {
			m.clientURLs[i] = "http://" + a.String()
			continue
		}
		m.clientURLs[i] = "unix://" + a.String()
		// The directory already keeps other users out; the socket's own mode (umask's
		// choice, often group-writable) should not be the next thing that matters.
		if err := os.Chmod(a.String(), 0o600); err != nil {
			m.Close()
			return nil, fmt.Errorf("etcd client socket: %w", err)
		}
	}
	return m, nil
}

// ClientURLs are the addresses clients reach this member on.
func (m *Member) ClientURLs() []string { return m.clientURLs }

// Err reports a fatal error of the running member.
func (m *Member) Err() <-chan error { return m.e.Err() }

// Close stops the member and waits until its files are closed.
func (m *Member) Close() {
	m.e.Close()
	<-m.e.Server.StopNotify()
	if m.sockDir != "" {
		os.RemoveAll(m.sockDir)
	}
}

// newLogger is etcd's zap logger on stderr at level, minus the errors every clean Close logs
// ("setting up serving from embedded etcd failed" with a closed listener).
func newLogger(level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("etcd log level %q: %w", level, err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(os.Stderr), lvl)
	return zap.New(&quietClose{Core: core}), nil
}

// quietClose drops the error lines etcd writes in normal operation: when its listeners close
// on shutdown, and while a fresh member has no raft term yet.
type quietClose struct{ zapcore.Core }

func (q *quietClose) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	switch e.Message {
	case "setting up serving from embedded etcd failed.", // every clean Close
		"failed to update storage version": // a fresh member before its first raft term (retried)
		return ce
	}
	return q.Core.Check(e, ce)
}

func (q *quietClose) With(f []zapcore.Field) zapcore.Core { return &quietClose{Core: q.Core.With(f)} }

func parseURLs(ss []string) ([]url.URL, error) {
	out := make([]url.URL, 0, len(ss))
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("%q: scheme must be http or https", s)
		}
		out = append(out, *u)
	}
	return out, nil
}

// privateDir makes dir, and the member's sockets and files in it, reachable by this user
// alone: created 0700 (as etcd would), or narrowed to 0700 when it exists with more.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("etcd data directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("etcd data directory: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("etcd data directory %s is open to other users: %w", dir, err)
		}
	}
	return nil
}

// maxSocketPath is the longest path a unix socket address holds (sun_path is 108 bytes on
// Linux, 104 on the BSDs and macOS, with a terminating NUL).
const maxSocketPath = 103

// clientSocket is the path of the default member's client socket: client.sock in dataDir,
// or, when that path is too long for a socket address (deep test directories), in a new
// 0700 directory under os.TempDir() that the caller removes after the member (dir).
//
// etcd removes whatever is at the path before it listens, so a socket on which a member
// still answers means a second member on the same data directory: refused, not stolen.
func clientSocket(dataDir string) (sock, dir string, err error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", "", fmt.Errorf("etcd data directory: %w", err)
	}
	sock = filepath.Join(abs, "client.sock")
	if len(sock) > maxSocketPath {
		if dir, err = os.MkdirTemp("", "kube-etcd-"); err != nil {
			return "", "", fmt.Errorf("etcd client socket: %w", err)
		}
		sock = filepath.Join(dir, "client.sock")
		if len(sock) > maxSocketPath {
			os.RemoveAll(dir)
			return "", "", fmt.Errorf("etcd client socket: %s is too long a path for a unix socket (TMPDIR too deep)", sock)
		}
		return sock, dir, nil
	}
	if _, err := os.Stat(sock); errors.Is(err, fs.ErrNotExist) {
		return sock, "", nil
	}
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		return "", "", fmt.Errorf("etcd data directory %s is in use: a member answers on %s", dataDir, sock)
	}
	return sock, "", nil
}
