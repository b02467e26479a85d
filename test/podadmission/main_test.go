// Package podadmission tests kube-apiserver's default admission plugins in Kube
// (internal/admission/builtin) end to end, with real kubectl against one in-process server
// on embedded etcd: PodSecurity from namespace labels, ResourceQuota, LimitRanger, the
// default ServiceAccount and its token volume, DefaultTolerationSeconds, Priority,
// NamespaceLifecycle and NodeRestriction.
package podadmission

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server/servertest"
)

var (
	srv     *servertest.Server
	kubectl string
	home    string
)

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	home = filepath.Join(dir, "home")
	if kubectl, err = servertest.FindKubectl("1.33"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(filepath.Join(dir, "server"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs kubectl as admin with stdin and returns stdout, stderr and the error.
func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return servertest.RunKubectl(kubectl, home, srv.Kubeconfig, stdin, args...)
}

// must runs kubectl as admin and fails the test when it fails.
func must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := run(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// clientset is an admin client.
func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// userKubeconfig mints a client certificate for user in groups with the server's CA, as
// `kube certs user` does, and returns the kubeconfig's path.
func userKubeconfig(t *testing.T, user string, groups ...string) string {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClientCert(user, groups, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := pki.WriteKubeconfig(path, srv.URL, ca.CAPEM, certPEM, keyPEM, user); err != nil {
		t.Fatal(err)
	}
	return path
}
