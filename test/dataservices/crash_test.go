package dataservices

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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/dataservices/servers/testservers"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// crashServer is a `kube server` child process on dataDir (kill -9 and restart).
type crashServer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is waited for (its one Wait)
	mu     sync.Mutex
	out    strings.Builder
}

func startCrashServer(t *testing.T, bin, dataDir string, port int) *crashServer {
	t.Helper()
	s := &crashServer{cmd: exec.Command(bin, "server", "--data-dir", dataDir, "--secure-port", fmt.Sprint(port),
		"--embedded-nats=false", "--embedded-s3=false"), exited: make(chan struct{})}
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	// The only Wait: a second one racing it can block for ever (both wait for the output
	// copier's end, which only one receives; a local CI run hung 15 minutes there).
	go func() { _ = s.cmd.Wait(); pw.Close(); close(s.exited) }()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *crashServer) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
}

func (s *crashServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return tail(s.out.String(), 60)
}

// crashClient waits for the server's kubeconfig and readiness and returns a client.
func crashClient(t *testing.T, s *crashServer, dataDir string) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	var c client.Client
	eventually(t, 3*time.Minute, func() error {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
		if err != nil {
			return err
		}
		if c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		var l v1alpha1.DatabaseList
		if err := c.List(context.Background(), &l); err != nil {
			return fmt.Errorf("%w\n%s", err, s.log())
		}
		return nil
	})
	return c
}

// TestDatabasesConvergeAfterKill9: `kube server` is killed with SIGKILL while 40 Databases
// are being provisioned; after the restart every one is Active, each database and role
// exists once, and every connection Secret logs in (the password the role has is the one
// its Secret holds).
func TestDatabasesConvergeAfterKill9(t *testing.T) {
	ctx := context.Background()
	bin := servertest.BuildKube(t, t.TempDir())
	dataDir, port := t.TempDir(), testservers.FreePort(t)
	s := startCrashServer(t, bin, dataDir, port)
	c := crashClient(t, s, dataDir)

	tn := &v1alpha1.Tenant{}
	tn.Name, tn.Spec.Environments = "crash", []string{"dev"}
	if err := c.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	const ns, n = "crash-dev", 40
	eventually(t, time.Minute, func() error { return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) })
	for i := range n {
		db := &v1alpha1.Database{}
		db.Namespace, db.Name = ns, fmt.Sprintf("db-%d", i)
		db.Spec.DeletionPolicy = "Delete"
		if err := c.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	// The Databases wait for a server entry; registering it starts all of them at once.
	entry := &corev1.Secret{Type: servers.SecretType, Data: map[string][]byte{servers.KeyURL: []byte(pg.URL)}}
	entry.Namespace, entry.Name = servers.Namespace, "pg-crash"
	entry.Labels = map[string]string{servers.LabelKind: servers.PostgreSQL}
	entry.Annotations = map[string]string{servers.AnnotationDefault: "true"}
	if err := c.Create(ctx, entry); err != nil {
		t.Fatal(err)
	}
	active := func() (int, error) {
		var l v1alpha1.DatabaseList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		k := 0
		for _, db := range l.Items {
			if db.Status.Phase == lifecycle.PhaseActive {
				k++
			}
		}
		return k, nil
	}
	// Kill as soon as provisioning is under way (some done, not all).
	before := 0
	eventually(t, 2*time.Minute, func() error {
		k, err := active()
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("none Active yet")
		}
		s.kill()
		before = k
		return nil
	})
	<-s.exited
	t.Logf("killed with %d of %d Active", before, n)
	if before == n {
		t.Fatalf("all %d were Active before the kill: nothing was in flight", n)
	}

	s = startCrashServer(t, bin, dataDir, port)
	c = crashClient(t, s, dataDir)
	eventually(t, 3*time.Minute, func() error {
		k, err := active()
		if err != nil {
			return err
		}
		if k != n {
			return fmt.Errorf("%d of %d Active after the restart", k, n)
		}
		return nil
	})
	for _, q := range []string{
		`SELECT count(*) FROM pg_database WHERE datname LIKE 'crash\_dev\_db\_%'`,
		`SELECT count(*) FROM pg_roles WHERE rolname LIKE 'crash\_dev\_db\_%'`,
	} {
		out, err := psql(pg.URL, q)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != fmt.Sprint(n) {
			t.Fatalf("%s: %s, want %d", q, out, n)
		}
	}
	for i := range n {
		var sec corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("db-%d-database", i)}, &sec); err != nil {
			t.Fatal(err)
		}
		if out, err := psql(string(sec.Data["uri"]), "SELECT current_user"); err != nil || strings.TrimSpace(out) != fmt.Sprintf("crash_dev_db_%d", i) {
			t.Fatalf("db-%d: login with its Secret: %q %v", i, out, err)
		}
	}
	// Clean up on the server: Delete policy drops them.
	for i := range n {
		db := &v1alpha1.Database{}
		db.Namespace, db.Name = ns, fmt.Sprintf("db-%d", i)
		_ = c.Delete(ctx, db)
	}
	eventually(t, 2*time.Minute, func() error {
		out, err := psql(pg.URL, `SELECT count(*) FROM pg_database WHERE datname LIKE 'crash\_dev\_db\_%'`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "0" {
			return fmt.Errorf("%s databases left", strings.TrimSpace(out))
		}
		return nil
	})
}
