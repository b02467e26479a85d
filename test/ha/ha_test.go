// Package ha tests high availability with real processes: three `kube etcd` members form a
// cluster, three `kube server` processes share it (the second and third use the first's PKI
// through --pki-dir), and the test kills processes with SIGKILL: a write through one server
// is seen by watches on the others; when the garbage collector's leader dies another server
// takes its Lease within 15 s and collects; with one etcd member gone, writes continue.
package ha

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest/kubeproc"
	"kubeos.dev/kube/internal/server/servertest/slot"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// proc is a child process with its output kept for failure reports.
type proc struct {
	name  string
	cmd   *exec.Cmd
	out   *lockedBuffer
	ready chan struct{}
	done  chan struct{}
}

func start(t *testing.T, name, readyLine string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &lockedBuffer{}, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.out, line)
			if strings.Contains(line, readyLine) {
				once.Do(func() { close(p.ready) })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { _ = p.cmd.Wait(); pw.Close(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("%s exited before it was ready:\n%s", p.name, tail(p.out.String(), 40))
	case <-time.After(timeout):
		t.Fatalf("%s not ready within %s:\n%s", p.name, timeout, tail(p.out.String(), 40))
	}
}

type server struct {
	*proc
	port int
	cs   *kubernetes.Clientset
}

func TestHighAvailability(t *testing.T) {
	begin := time.Now()
	dir := t.TempDir()
	bin := kubeproc.BuildKube(t, dir)
	t.Logf("built in %s", time.Since(begin).Round(time.Millisecond))

	// Three etcd members.
	ports := freePorts(t, 9)
	var cluster, endpoints []string
	for i := range 3 {
		cluster = append(cluster, fmt.Sprintf("e%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
		endpoints = append(endpoints, fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]))
	}
	var members []*proc
	for i := range 3 {
		members = append(members, start(t, fmt.Sprintf("etcd e%d", i+1), "serving clients", bin, "etcd",
			"--name", fmt.Sprintf("e%d", i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("e%d", i+1)),
			"--listen-client-urls", endpoints[i], "--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			"--initial-cluster", strings.Join(cluster, ",")))
	}
	for _, m := range members {
		m.waitReady(t, 30*time.Second)
	}

	// Three servers; the first creates the PKI the others share.
	var servers []*server
	for i := range 3 {
		port := ports[6+i]
		args := []string{bin, "server", "--data-dir", filepath.Join(dir, fmt.Sprintf("s%d", i+1)),
			"--secure-port", fmt.Sprint(port), "--etcd-servers", strings.Join(endpoints, ",")}
		if i > 0 {
			args = append(args, "--pki-dir", filepath.Join(dir, "s1", "pki"))
		}
		s := &server{proc: start(t, fmt.Sprintf("server s%d", i+1), "Kube is ready", args...), port: port}
		s.waitReady(t, 60*time.Second)
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, fmt.Sprintf("s%d", i+1), "kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.QPS, cfg.Burst, cfg.Timeout = -1, 0, 10*time.Second
		if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	t.Logf("3 etcd members and 3 servers up after %s", time.Since(begin).Round(time.Millisecond))
	ctx := context.Background()
	dump := func() string {
		var b strings.Builder
		for _, p := range append(members, servers[0].proc, servers[1].proc, servers[2].proc) {
			fmt.Fprintf(&b, "--- %s\n%s\n", p.name, tail(p.out.String(), 15))
		}
		return b.String()
	}

	// A write through s1 is seen by watches on s2 and s3.
	var watchers []watch.Interface
	for _, s := range servers[1:] {
		w, err := s.cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ha-write"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watchers = append(watchers, w)
	}
	if _, err := servers[0].cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ha-write"}, Data: map[string]string{"via": "s1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, w := range watchers {
		select {
		case ev := <-w.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Added || !ok || cm.Data["via"] != "s1" {
				t.Fatalf("watch on s%d: %s %#v", i+2, ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch on s%d saw nothing within 10 s", i+2)
		}
	}

	// Kill -9 the garbage collector's leader; another server takes the Lease within 15 s.
	holder := func(s *server) string {
		l, err := s.cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-garbage-collector", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader *server
	var leaderID string
	eventuallyT(t, 20*time.Second, "a garbage collector leader", dump, func() bool {
		leaderID = holder(servers[0])
		for _, s := range servers {
			if strings.HasSuffix(leaderID, fmt.Sprintf(":%d", s.port)) {
				leader = s
			}
		}
		return leader != nil
	})
	var survivors []*server
	for _, s := range servers {
		if s != leader {
			survivors = append(survivors, s)
		}
	}
	leader.kill()
	killed := time.Now()
	var newID string
	eventuallyT(t, 20*time.Second, "a new garbage collector leader", dump, func() bool {
		newID = holder(survivors[0])
		return newID != "" && newID != leaderID
	})
	takeover := time.Since(killed)
	t.Logf("killed %s (leader %s); %s took the Lease after %s", leader.name, leaderID, newID, takeover.Round(time.Millisecond))
	if takeover > 15*time.Second {
		t.Errorf("takeover took %s, want at most 15 s", takeover)
	}

	// Garbage collection still works, through whichever server.
	cms := survivors[1].cs.CoreV1().ConfigMaps("default")
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ha-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("ha-dep-%d", i), Labels: map[string]string{"ha": "dep"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := survivors[0].cs.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyT(t, 30*time.Second, "dependents collected by the new leader", dump, func() bool {
		l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "ha=dep"})
		return err == nil && len(l.Items) == 0
	})

	// Kill -9 one etcd member: writes continue through both servers.
	members[0].kill()
	for i, s := range survivors {
		name := fmt.Sprintf("after-etcd-loss-%d", i)
		eventuallyT(t, 20*time.Second, "a write with one etcd member down", dump, func() bool {
			_, err := s.cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err == nil
		})
		for _, r := range survivors {
			eventuallyT(t, 10*time.Second, "the write read back on every server", dump, func() bool {
				_, err := r.cs.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
				return err == nil
			})
		}
	}
	t.Logf("done after %s", time.Since(begin).Round(time.Millisecond))
}

func eventuallyT(t *testing.T, timeout time.Duration, what string, dump func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s\n%s", what, timeout, dump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		p, err := slot.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	return ports
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type lockedBuffer = kubeproc.Buffer
