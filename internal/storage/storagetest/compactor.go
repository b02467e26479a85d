package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kubeos.dev/kube/internal/storage"
)

// compactRevKey is where storage.Compactor records its rounds (an implementation detail the
// suite reads to know which revision each round saw).
const compactRevKey = "/registry-compact-rev"

// startCompactor runs c until the test ends.
func startCompactor(t *testing.T, c *storage.Compactor) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("compactor: %v", err)
		}
	})
}

// compactedRevision finds etcd's compaction revision, the oldest revision still readable (1
// when nothing was compacted), by bisection: reads below it fail with ErrCompacted.
func compactedRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, compactRevKey)
	if err != nil {
		return 0, err
	}
	lo, hi := int64(1), resp.Header.Revision // hi is readable
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, err := cli.Get(ctx, compactRevKey, clientv3.WithRev(mid))
		switch {
		case err == nil:
			hi = mid
		case errors.Is(err, rpctypes.ErrCompacted):
			lo = mid + 1
		default:
			return 0, err
		}
	}
	return lo, nil
}

// roundPuts watches the compactor's record and delivers the revision and time of every round
// someone won.
func roundPuts(t *testing.T, cli *clientv3.Client) <-chan time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make(chan time.Time, 1000)
	wch := cli.Watch(ctx, compactRevKey)
	go func() {
		for resp := range wch {
			for range resp.Events {
				out <- time.Now()
			}
		}
	}()
	return out
}

// compactionState reads, consistently, the revisions of the last two rounds' records and the
// cluster's compaction revision.
func compactionState(ctx context.Context, cli *clientv3.Client) (prev, last, compacted int64, err error) {
	for {
		r1, err := cli.Get(ctx, compactRevKey)
		if err != nil || len(r1.Kvs) == 0 || r1.Kvs[0].Version < 2 {
			return 0, 0, 0, fmt.Errorf("fewer than two rounds recorded: %v", err)
		}
		last = r1.Kvs[0].ModRevision
		r0, err := cli.Get(ctx, compactRevKey, clientv3.WithRev(last-1))
		if err != nil || len(r0.Kvs) == 0 {
			return 0, 0, 0, fmt.Errorf("previous round's record: %v", err)
		}
		prev = r0.Kvs[0].ModRevision
		if compacted, err = compactedRevision(ctx, cli); err != nil {
			return 0, 0, 0, err
		}
		r2, err := cli.Get(ctx, compactRevKey)
		if err != nil {
			return 0, 0, 0, err
		}
		if r2.Kvs[0].ModRevision == last {
			return prev, last, compacted, nil
		}
	}
}

func testCompactor(t *testing.T, s Store) {
	const interval = 100 * time.Millisecond
	cli := s.Client()
	p := prefixFor(t)

	t.Run("one compactor", func(t *testing.T) {
		puts := roundPuts(t, cli)
		startCompactor(t, &storage.Compactor{Client: cli, Interval: interval})
		deadline := time.After(wait)
		for n := 0; n < 3; n++ {
			mustCreate(t, s, fmt.Sprintf("%s%d", p, n), newObj("x", nil)) // history to compact
			select {
			case <-puts:
			case <-deadline:
				t.Fatalf("only %d rounds within %v", n, wait)
			}
		}
		// Each round compacts to the revision the previous round recorded: one interval of
		// history stays. Right after a record, compaction may not have happened yet.
		for {
			prev, last, compacted, err := compactionState(t.Context(), cli)
			if err != nil {
				t.Fatal(err)
			}
			if compacted == prev {
				break
			}
			if compacted > prev {
				t.Fatalf("compacted to %d, past the previous round's revision %d (latest round %d)", compacted, prev, last)
			}
			select {
			case <-puts:
			case <-deadline:
				t.Fatalf("compaction revision %d never reached the previous round's %d", compacted, prev)
			}
		}
	})

	t.Run("two compactors", func(t *testing.T) {
		// Two servers sharing a cluster: one compaction per interval between them.
		puts := roundPuts(t, cli)
		startCompactor(t, &storage.Compactor{Client: cli, Interval: interval})
		startCompactor(t, &storage.Compactor{Client: cli, Interval: interval})
		const rounds = 10
		var first, lastAt time.Time
		deadline := time.After(wait)
		for n := 0; n <= rounds; n++ {
			select {
			case at := <-puts:
				if n == 0 {
					first = at
				}
				lastAt = at
			case <-deadline:
				t.Fatalf("only %d rounds within %v", n, wait)
			}
		}
		if took := lastAt.Sub(first); took < rounds*interval*7/10 {
			t.Errorf("%d rounds in %v with a %v interval: both compactors ran each round", rounds, took, interval)
		}
		prev, last, compacted, err := compactionState(t.Context(), cli)
		if err != nil {
			t.Fatal(err)
		}
		if compacted >= last {
			t.Errorf("compacted to %d, the latest round recorded %d (the one before %d): no history left", compacted, last, prev)
		}
	})
}
