package ha

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/server/servertest/kubeproc"
)

// TestEtcdServersOverrides runs `kube server --etcd-servers-overrides /events#<url>` on its
// embedded etcd with a second etcd cluster (a member in this process, on a free port): Events
// created with kubectl (core/v1 and events.k8s.io/v1) are stored in the second cluster only,
// listed and watched through Kube, compacted there, and still served after the server is
// killed and started again; other objects stay in the embedded etcd. A malformed value is
// refused at start with upstream's message.
func TestEtcdServersOverrides(t *testing.T) {
	dir := t.TempDir()
	bin := kubeBinary(t, dir)
	kubectl, err := kubeproc.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)

	// Refused at start, before anything runs.
	for _, bad := range []string{"/events/http://127.0.0.1:2479", "/events#127.0.0.1:2479", "/events#http://a:1;"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, bin, "server", "--data-dir", filepath.Join(dir, "refused"), "--secure-port", fmt.Sprint(ports[2]),
			"--etcd-servers-overrides", bad).CombinedOutput()
		cancel()
		const upstream = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated"
		if err == nil || !strings.Contains(string(out), upstream) || !strings.Contains(string(out), bad) {
			t.Fatalf("--etcd-servers-overrides %s: %v, output:\n%s", bad, err, out)
		}
	}

	// The Events' own cluster.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eventsURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{Name: "events", DataDir: filepath.Join(dir, "events-etcd"), ClientURLs: []string{eventsURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	events, err := etcd.NewClient(etcd.ClientOptions{Endpoints: []string{eventsURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()

	kdir := filepath.Join(dir, "kube")
	s := startKube(t, bin, "server", kdir, ports[1], "--etcd-servers-overrides", "/events#"+eventsURL, "--etcd-compaction-interval", "15s")
	// Compaction keeps one interval of history: 2 s let a loaded machine's `kubectl get -w`
	// find its list's resourceVersion compacted before its watch began (410 Expired).
	// The embedded etcd, through its socket in the data directory.
	embedded, err := etcd.NewClient(etcd.ClientOptions{Endpoints: []string{"unix://" + filepath.Join(kdir, "etcd", "client.sock")}})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()

	home := t.TempDir()
	kubeconfig := filepath.Join(kdir, "kubeconfig")
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := kubeproc.RunKubectl(kubectl, home, kubeconfig, stdin, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	const ns = "overrides"
	run("", "create", "namespace", ns)
	run(coreEvent("ev1")+"---\n"+eventsV1Event("ev2"), "create", "-f", "-")
	run("", "create", "configmap", "cm1", "-n", ns, "--from-literal=a=b")

	keys := func(c *clientv3.Client, prefix string) []string {
		t.Helper()
		resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, strings.TrimPrefix(string(kv.Key), prefix))
		}
		return out
	}
	eventPrefix := "/registry/core/events/" + ns + "/"
	cmPrefix := "/registry/core/configmaps/" + ns + "/"
	if got := keys(events, eventPrefix); !slices.Equal(got, []string{"ev1", "ev2"}) {
		t.Fatalf("events in the events cluster: %v, want ev1 ev2", got)
	}
	if got := keys(embedded, "/registry/core/events/"); len(got) != 0 {
		t.Fatalf("events in the embedded etcd: %v", got)
	}
	if got := keys(embedded, cmPrefix); !slices.Contains(got, "cm1") {
		t.Fatalf("configmaps in the embedded etcd: %v, want cm1 among them", got)
	}
	if got := keys(events, "/registry/core/configmaps/"); len(got) != 0 {
		t.Fatalf("configmaps in the events cluster: %v", got)
	}
	// resourceVersions are the events cluster's revisions.
	resp, err := events.Get(ctx, eventPrefix+"ev1")
	if err != nil {
		t.Fatal(err)
	}
	if rv := run("", "get", "event", "ev1", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}"); rv != fmt.Sprint(resp.Kvs[0].ModRevision) {
		t.Fatalf("ev1's resourceVersion %s, want the events cluster's mod revision %d", rv, resp.Kvs[0].ModRevision)
	}
	if got := run("", "get", "events", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"); got != "ev1 ev2" {
		t.Fatalf("kubectl get events: %q", got)
	}
	if got := run("", "get", "events.v1.events.k8s.io", "-n", ns, "-o", "jsonpath={.items[*].note}"); got != "note ev1 note ev2" {
		t.Fatalf("kubectl get events.v1.events.k8s.io: %q", got)
	}

	// A watch sees an Event created after it started.
	w := startKubectlWatch(t, kubectl, home, kubeconfig, "get", "events", "-n", ns, "--watch", "-o", "name")
	w.waitFor(t, "event/ev2")
	run(coreEvent("ev3"), "create", "-f", "-")
	w.waitFor(t, "event/ev3")
	w.stop()

	// The events cluster is compacted on its own: its revision 1 goes.
	waitFor(t, 2*time.Minute, "the events cluster compacted", func() string { return "" }, func() error {
		_, err := events.Get(ctx, "/registry/health", clientv3.WithRev(1))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nil
		}
		return fmt.Errorf("revision 1 still readable (%v)", err)
	})

	// Killed and started again: the Events are still served from their cluster.
	s.kill()
	s.restart(t, "server (restarted)")
	if got := run("", "get", "events", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"); got != "ev1 ev2 ev3" {
		t.Fatalf("kubectl get events after the restart: %q", got)
	}
	w = startKubectlWatch(t, kubectl, home, kubeconfig, "get", "events", "-n", ns, "--watch", "-o", "name")
	w.waitFor(t, "event/ev3")
	run(coreEvent("ev4"), "create", "-f", "-")
	w.waitFor(t, "event/ev4")
	w.stop()
	if got := keys(events, eventPrefix); !slices.Equal(got, []string{"ev1", "ev2", "ev3", "ev4"}) {
		t.Fatalf("events in the events cluster after the restart: %v", got)
	}
	if got := keys(embedded, "/registry/core/events/"); len(got) != 0 {
		t.Fatalf("events in the embedded etcd after the restart: %v", got)
	}
	// The events cluster is a health check of its own, as upstream's etcd-override-0.
	if got := run("", "get", "--raw", "/readyz/etcd-override-0"); got != "ok" {
		t.Fatalf("/readyz/etcd-override-0: %q", got)
	}
	if got := run("", "get", "--raw", "/healthz?verbose"); !strings.Contains(got, "[+]etcd-override-0 ok") {
		t.Fatalf("/healthz?verbose does not pass etcd-override-0:\n%s", got)
	}
	// And a ComponentStatus of its own, etcd-1, as upstream lists one per storage configuration.
	if got := run("", "get", "componentstatuses", "-o", "jsonpath={.items[*].metadata.name}"); got != "scheduler controller-manager etcd-0 etcd-1" {
		t.Fatalf("kubectl get componentstatuses: %q", got)
	}
	if got := run("", "get", "componentstatuses", "etcd-1", "-o", "jsonpath={.conditions[0].type}={.conditions[0].status}"); got != "Healthy=True" {
		t.Fatalf("kubectl get componentstatuses etcd-1: %q", got)
	}
	run("", "delete", "event", "ev1", "-n", ns)
	if got := keys(events, eventPrefix); !slices.Equal(got, []string{"ev2", "ev3", "ev4"}) {
		t.Fatalf("events in the events cluster after a delete: %v", got)
	}
}

func coreEvent(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: %[1]s, namespace: overrides}
involvedObject: {kind: ConfigMap, name: cm1, namespace: overrides, apiVersion: v1}
reason: Testing
message: note %[1]s
type: Normal
source: {component: etcdoverrides-test}
`, name)
}

func eventsV1Event(name string) string {
	return fmt.Sprintf(`apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: %[1]s, namespace: overrides}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: kube.dev/etcdoverrides-test
reportingInstance: test
action: Testing
reason: Testing
regarding: {kind: ConfigMap, name: cm1, namespace: overrides, apiVersion: v1}
note: note %[1]s
type: Normal
`, name)
}

// kubectlWatch is a running `kubectl get -w` whose output lines are kept.
type kubectlWatch struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	mu     sync.Mutex
	lines  []string
	errOut *kubeproc.Buffer
	done   chan struct{}
}

func startKubectlWatch(t *testing.T, kubectl, home, kubeconfig string, args ...string) *kubectlWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	w := &kubectlWatch{cancel: cancel, errOut: &kubeproc.Buffer{}, done: make(chan struct{})}
	w.cmd = exec.CommandContext(ctx, kubectl, args...)
	w.cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + kubeconfig, "PATH=" + os.Getenv("PATH"), "KUBECACHEDIR=" + filepath.Join(home, "cache")}
	w.cmd.Stderr = w.errOut
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
		_ = w.cmd.Wait()
	}()
	t.Cleanup(w.stop)
	return w
}

// waitFor waits until the watch printed line.
func (w *kubectlWatch) waitFor(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		found := slices.Contains(w.lines, line)
		lines := slices.Clone(w.lines)
		w.mu.Unlock()
		if found {
			return
		}
		select {
		case <-w.done:
			t.Fatalf("kubectl watch ended before %q; printed %q\n%s", line, lines, w.errOut.String())
		case <-deadline:
			t.Fatalf("kubectl watch: no %q within a minute; printed %q\n%s", line, lines, w.errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *kubectlWatch) stop() {
	w.cancel()
	<-w.done
}
