package storage

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactRevKey records the last compaction so that several Kube servers sharing one etcd
// cluster compact once per interval between them, not once each.
const compactRevKey = "/registry-compact-rev"

// Compactor compacts one etcd cluster's history on a timer (a store with overrides needs
// one per cluster: Store.Clusters). At every tick it compacts to the revision it
// saw at the previous tick, so at least one interval of history stays available for watches
// to resume from.
type Compactor struct {
	// Store, when set, is the cluster's store: its CompactRevision follows the compactions
	// (this server's and those another server records), and Client defaults to its client.
	Store    *Store
	Client   *clientv3.Client
	Interval time.Duration
	Log      *slog.Logger
}

// Start runs the compactor until ctx ends.
func (c *Compactor) Start(ctx context.Context) error {
	if c.Interval <= 0 {
		<-ctx.Done()
		return nil
	}
	if c.Client == nil && c.Store != nil {
		c.Client = c.Store.client
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	var version, lastRev int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var err error
		version, lastRev, err = c.compactOnce(ctx, version, lastRev)
		if err != nil && ctx.Err() == nil {
			log.Warn("compaction failed", "err", err)
		}
	}
}

// compactOnce records the current revision and compacts to lastRev, the one recorded a tick
// ago. The compare on the record's version makes exactly one server win each round.
func (c *Compactor) compactOnce(ctx context.Context, version, lastRev int64) (int64, int64, error) {
	resp, err := c.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(compactRevKey), "=", version)).
		Then(clientv3.OpPut(compactRevKey, strconv.FormatInt(lastRev, 10))).
		Else(clientv3.OpGet(compactRevKey)).
		Commit()
	if err != nil {
		return version, lastRev, err
	}
	curRev := resp.Header.Revision
	if !resp.Succeeded {
		// Another server compacted this round; follow its record.
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			// The winner records the revision it compacts to.
			if rev, err := strconv.ParseInt(string(kvs[0].Value), 10, 64); err == nil && rev > 0 && c.Store != nil {
				c.Store.noteCompacted(rev)
			}
			return kvs[0].Version, curRev, nil
		}
		return 0, curRev, nil
	}
	if lastRev > 0 {
		if _, err := c.Client.Compact(ctx, lastRev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return version + 1, curRev, err
		}
		if c.Store != nil {
			c.Store.noteCompacted(lastRev)
		}
	}
	return version + 1, curRev, nil
}

// Compact compacts the history of the store's own cluster up to rev at once. Tests and
// tools use it.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	_, err := s.client.Compact(ctx, rev)
	if err == nil || errors.Is(err, rpctypes.ErrCompacted) {
		s.noteCompacted(rev)
	}
	return wrapEtcd("", err)
}
