package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// Environment of the child process.
const (
	envChild     = "KUBE_CRASHTEST_CHILD"
	envDir       = "KUBE_CRASHTEST_DIR"
	envClientURL = "KUBE_CRASHTEST_CLIENT_URL"
	envPeerURL   = "KUBE_CRASHTEST_PEER_URL"
	envRound     = "KUBE_CRASHTEST_ROUND"
	envWriters   = "KUBE_CRASHTEST_WRITERS"
	// envRounds sets how many kill/restart rounds the parent runs.
	envRounds = "KUBE_CRASH_ROUNDS"
)

// prefix holds every object the child writes; nothing else writes to its member, so every
// etcd revision after 1 is exactly one change under prefix.
const prefix = "/registry/crashtest/objects/"

const wait = 60 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child runs an etcd member and, with writers > 0, writes until it is killed, printing
// "ACK <key> <revision> <count>" for every write the store acknowledged.
func child() int {
	round, _ := strconv.Atoi(os.Getenv(envRound))
	writers, _ := strconv.Atoi(os.Getenv(envWriters))
	ctx := context.Background()
	startCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := etcd.StartMember(startCtx, etcd.MemberOptions{
		DataDir:    os.Getenv(envDir),
		ClientURLs: []string{os.Getenv(envClientURL)},
		PeerURLs:   []string{os.Getenv(envPeerURL)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	cli, err := etcd.NewClient(etcd.ClientOptions{Endpoints: m.ClientURLs()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	s := storage.New(cli)
	var mu sync.Mutex
	ack := func(key string, obj *unstructured.Unstructured) {
		n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "count")
		line := fmt.Sprintf("ACK %s %s %d\n", key, obj.GetResourceVersion(), n)
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(line)
	}
	fmt.Println("READY")
	for g := range writers {
		go func() {
			var own []string
			shared := fmt.Sprintf("%sshared-%d", prefix, g%2)
			for i := 0; ; i++ {
				switch {
				case i%3 == 0 || len(own) == 0:
					name := fmt.Sprintf("r%03d-g%d-%05d", round, g, i)
					obj, err := s.Create(ctx, prefix+name, object(name, 0))
					if err != nil {
						fmt.Fprintln(os.Stderr, "child create:", err)
						continue
					}
					own = append(own, prefix+name)
					ack(prefix+name, obj)
				default:
					key := own[rand.IntN(len(own))]
					if i%3 == 2 {
						key = shared
					}
					obj, err := s.GuaranteedUpdate(ctx, key, storage.UpdateOptions{AllowCreate: true}, increment(strings.TrimPrefix(key, prefix)))
					if err != nil {
						fmt.Fprintln(os.Stderr, "child update:", err)
						continue
					}
					ack(key, obj)
				}
			}
		}()
	}
	select {} // until killed
}

func object(name string, count int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"count": count, "pad": strings.Repeat("x", 200)},
	}}
}

func increment(name string) storage.UpdateFunc {
	return func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		if cur == nil {
			return object(name, 1), nil
		}
		n, _, _ := unstructured.NestedInt64(cur.Object, "spec", "count")
		return cur, unstructured.SetNestedField(cur.Object, n+1, "spec", "count")
	}
}

type ack struct {
	key   string
	rev   int64
	count int64
}

type state struct {
	rev   int64
	count int64
}

// history is what the parent learned from watches across all rounds.
type history struct {
	lastSeen int64            // revision of the last event seen
	keyAt    map[int64]string // revision → key changed
	model    map[string]state // the objects, folded from the events
}

// apply folds one watch event in, checking it is the very next revision.
func (h *history) apply(t *testing.T, ev storage.Event) {
	t.Helper()
	if ev.Revision != h.lastSeen+1 {
		t.Fatalf("watch delivered revision %d after %d (every revision is one change under the prefix): gap or duplicate", ev.Revision, h.lastSeen)
	}
	if _, dup := h.keyAt[ev.Revision]; dup {
		t.Fatalf("revision %d delivered twice", ev.Revision)
	}
	h.lastSeen = ev.Revision
	h.keyAt[ev.Revision] = ev.Key
	switch ev.Type {
	case storage.Added, storage.Modified:
		n, _, _ := unstructured.NestedInt64(ev.Object.Object, "spec", "count")
		h.model[ev.Key] = state{ev.Revision, n}
	case storage.Deleted:
		delete(h.model, ev.Key)
	default:
		t.Fatalf("unexpected %s event", ev.Type)
	}
}

func freeURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

type childProc struct {
	cmd  *exec.Cmd
	acks chan ack // closed when the child's stdout ends
}

func startChild(t *testing.T, dir, clientURL, peerURL string, round, writers int) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envChild+"=1", envDir+"="+filepath.Join(dir, "etcd"), envClientURL+"="+clientURL, envPeerURL+"="+peerURL,
		envRound+"="+strconv.Itoa(round), envWriters+"="+strconv.Itoa(writers))
	stderr, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("child-%d.log", round)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childProc{cmd: cmd, acks: make(chan ack, 1<<16)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	ready := make(chan bool, 1)
	go func() {
		defer close(c.acks)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "READY":
				ready <- true
			case len(f) == 4 && f[0] == "ACK":
				rev, err1 := strconv.ParseInt(f[2], 10, 64)
				n, err2 := strconv.ParseInt(f[3], 10, 64)
				if err1 == nil && err2 == nil {
					c.acks <- ack{f[1], rev, n}
				}
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			log, _ := os.ReadFile(stderr.Name())
			t.Fatalf("child of round %d exited before it was ready:\n%s", round, log)
		}
	case <-time.After(wait):
		t.Fatalf("child of round %d not ready within %v", round, wait)
	}
	return c
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills etcd members")
	}
	rounds := 2
	if s := os.Getenv(envRounds); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envRounds, s)
		}
		rounds = n
	}
	dir := t.TempDir()
	clientURL, peerURL := freeURL(t), freeURL(t)
	h := &history{lastSeen: 1, keyAt: map[int64]string{}, model: map[string]state{}}
	var acks []ack
	var maxAck int64
	totalStart := time.Now()

	for round := 0; round <= rounds; round++ {
		final := round == rounds
		writers := 4
		if final {
			writers = 0
		}
		start := time.Now()
		c := startChild(t, dir, clientURL, peerURL, round, writers)
		cli, err := etcd.NewClient(etcd.ClientOptions{Endpoints: []string{clientURL}})
		if err != nil {
			t.Fatal(err)
		}
		s := storage.New(cli)
		ctx, cancel := context.WithTimeout(context.Background(), wait)

		// Every write acknowledged before the kill is there, at its revision or a later one.
		checkAcks(t, ctx, s, acks)

		// Resume the watch from the last revision seen before the kill.
		w, err := s.Watch(ctx, prefix, storage.WatchOptions{Revision: h.lastSeen, ProgressNotify: true})
		if err != nil {
			t.Fatal(err)
		}
		resumedFrom := h.lastSeen
		if final {
			drainUntilCurrent(t, ctx, s, w, h)
			checkList(t, ctx, s, h)
			w.Stop()
			cancel()
			cli.Close()
			t.Logf("final restart: %d acknowledged writes present, watch resumed from %d delivered up to %d, list matches (%v)",
				len(acks), resumedFrom, h.lastSeen, time.Since(start).Round(time.Millisecond))
			break
		}

		// Kill mid-flight after a random number of acknowledged writes.
		killAfter := 50 + rand.IntN(300)
		var roundAcks int
		killed := false
		wch := w.ResultChan()
		for c.acks != nil {
			select {
			case a, ok := <-c.acks:
				if !ok {
					c.acks = nil
					break
				}
				if round > 0 && a.rev <= maxAck {
					t.Fatalf("write after restart got revision %d, not above %d acknowledged before the crash", a.rev, maxAck)
				}
				acks = append(acks, a)
				roundAcks++
				if roundAcks == killAfter && !killed {
					if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			case ev, ok := <-wch:
				if !ok {
					if !killed {
						t.Fatalf("watch ended before the kill")
					}
					wch = nil
					continue
				}
				if ev.Type == storage.ErrorEvent {
					if killed {
						continue // the member is gone
					}
					t.Fatalf("watch error before the kill: %v", ev.Err)
				}
				if ev.Type != storage.Bookmark {
					h.apply(t, ev)
				}
			case <-ctx.Done():
				t.Fatalf("round %d: %d acknowledged writes in %v, no kill", round, roundAcks, wait)
			}
		}
		err = c.cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die of SIGKILL: %v", err)
		}
		// Events already delivered came from the member before it died.
		w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != storage.Bookmark && ev.Type != storage.ErrorEvent {
				h.apply(t, ev)
			}
		}
		cancel()
		cli.Close()
		for _, a := range acks[len(acks)-roundAcks:] {
			maxAck = max(maxAck, a.rev)
		}
		t.Logf("round %d: watch resumed from %d, %d acknowledged writes, killed, last revision seen %d, highest acknowledged %d (%v)",
			round, resumedFrom, roundAcks, h.lastSeen, maxAck, time.Since(start).Round(time.Millisecond))
	}
	// Every acknowledged write is one of the changes the watches delivered, at its revision.
	for _, a := range acks {
		if h.keyAt[a.rev] != a.key {
			t.Errorf("acknowledged write of %s at %d: the watch saw %q at that revision", a.key, a.rev, h.keyAt[a.rev])
		}
	}
	t.Logf("%d rounds, %d acknowledged writes, %d revisions watched, %v", rounds, len(acks), len(h.keyAt), time.Since(totalStart).Round(time.Millisecond))
}

func checkAcks(t *testing.T, ctx context.Context, s *storage.Store, acks []ack) {
	t.Helper()
	res, err := s.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	got := map[string]state{}
	for _, it := range res.Items {
		n, _, _ := unstructured.NestedInt64(it.Object, "spec", "count")
		rev, _ := storage.Revision(it)
		got[prefix+it.GetName()] = state{rev, n}
	}
	for _, a := range acks {
		st, ok := got[a.key]
		switch {
		case !ok:
			t.Fatalf("acknowledged write of %s at %d lost", a.key, a.rev)
		case st.rev < a.rev || st.count < a.count:
			t.Fatalf("%s is at revision %d count %d, older than the acknowledged revision %d count %d", a.key, st.rev, st.count, a.rev, a.count)
		}
	}
	for _, a := range acks {
		if res.Revision < a.rev {
			t.Fatalf("store revision %d is behind an acknowledged write at %d", res.Revision, a.rev)
		}
	}
}

// drainUntilCurrent applies events until a bookmark says the watch has caught up with the
// store's current revision.
func drainUntilCurrent(t *testing.T, ctx context.Context, s *storage.Store, w storage.Watcher, h *history) {
	t.Helper()
	cur, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			switch ev.Type {
			case storage.ErrorEvent:
				t.Fatalf("resumed watch: %v", ev.Err)
			case storage.Bookmark:
				if ev.Revision >= cur && h.lastSeen == cur {
					return
				}
			default:
				h.apply(t, ev)
			}
		case <-tick.C:
			if err := s.RequestProgress(ctx); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("resumed watch reached %d of %d within %v", h.lastSeen, cur, wait)
		}
	}
}

// checkList compares the state folded from the watches with a list at the same revision.
func checkList(t *testing.T, ctx context.Context, s *storage.Store, h *history) {
	t.Helper()
	res, err := s.List(ctx, prefix, storage.ListOptions{Revision: h.lastSeen, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != len(h.model) {
		t.Errorf("list has %d objects, the watches %d", len(res.Items), len(h.model))
	}
	for _, it := range res.Items {
		key := prefix + it.GetName()
		n, _, _ := unstructured.NestedInt64(it.Object, "spec", "count")
		rev, _ := storage.Revision(it)
		if m, ok := h.model[key]; !ok || m.rev != rev || m.count != n {
			t.Errorf("%s: list has revision %d count %d, the watches %+v (known %v)", key, rev, n, m, ok)
		}
	}
}
