package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// MemberOptions configures one etcd member. Zero values mean: a single-member cluster named
// "default" listening on free loopback ports.
type MemberOptions struct {
	// Name is the member name; it must match an entry of InitialCluster when that is set.
	Name string
	// DataDir holds the member's WAL and database. Required.
	DataDir string
	// ClientURLs the member listens on for clients, e.g. http://127.0.0.1:2379. Empty: a free
	// loopback port.
	ClientURLs []string
	// PeerURLs the member listens on for other members. Empty: a free loopback port.
	PeerURLs []string
	// InitialCluster is "name=peerURL,..."; empty means a cluster of this member alone.
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
	if len(o.ClientURLs) == 0 {
		u, err := freeLoopbackURL()
		if err != nil {
			return err
		}
		o.ClientURLs = []string{u}
	}
	if len(o.PeerURLs) == 0 {
		u, err := freeLoopbackURL()
		if err != nil {
			return err
		}
		o.PeerURLs = []string{u}
	}
	if o.InitialCluster == "" {
		parts := make([]string, len(o.PeerURLs))
		for i, u := range o.PeerURLs {
			parts[i] = o.Name + "=" + u
		}
		o.InitialCluster = strings.Join(parts, ",")
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
}

// Client returns an in-process client of the member: its calls go straight to the member's
// server (no gRPC, no HTTP/2, no loopback socket), which saves about a tenth of a Kube
// server's CPU on writes. Close it before the member.
func (m *Member) Client() *clientv3.Client { return v3client.New(m.e.Server) }

// StartMember starts an etcd member and waits until it serves (it has joined a quorum), or
// until ctx ends.
func StartMember(ctx context.Context, o MemberOptions) (*Member, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
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
	cfg.InitialCluster = o.InitialCluster
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
	if cfg.ListenClientUrls, err = parseURLs(o.ClientURLs); err != nil {
		return nil, fmt.Errorf("etcd client URLs: %w", err)
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if cfg.ListenPeerUrls, err = parseURLs(o.PeerURLs); err != nil {
		return nil, fmt.Errorf("etcd peer URLs: %w", err)
	}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
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
	urls := make([]string, len(e.Clients))
	for i, l := range e.Clients {
		urls[i] = "http://" + l.Addr().String()
	}
	return &Member{e: e, clientURLs: urls}, nil
}

// ClientURLs are the addresses clients reach this member on.
func (m *Member) ClientURLs() []string { return m.clientURLs }

// Err reports a fatal error of the running member.
func (m *Member) Err() <-chan error { return m.e.Err() }

// Close stops the member and waits until its files are closed.
func (m *Member) Close() {
	m.e.Close()
	<-m.e.Server.StopNotify()
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

func freeLoopbackURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String(), nil
}
