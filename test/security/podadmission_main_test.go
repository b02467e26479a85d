package security

// The podadmission suite tests kube-apiserver's default admission plugins in Kube
// (internal/admission/builtin) end to end, with real kubectl against its own in-process server
// on embedded etcd: PodSecurity from namespace labels, ResourceQuota, LimitRanger, the
// default ServiceAccount and its token volume, DefaultTolerationSeconds, Priority,
// NamespaceLifecycle and NodeRestriction.

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
	podadmissionSrv     *servertest.Server
	podadmissionKubectl string
	podadmissionHome    string
)

var podadmissionSuite = servertest.NewFixture("podadmission", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	podadmissionHome = filepath.Join(dir, "home")
	if podadmissionKubectl, err = servertest.FindKubectl("1.33"); err != nil {
		return err
	}
	podadmissionSrv, err = servertest.Start(filepath.Join(dir, "server"), nil)
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() {
		podadmissionSrv.Stop()
		os.RemoveAll(dir)
	})
	return nil
})

// podadmissionRun runs kubectl as admin with stdin and returns stdout, stderr and the error.
func podadmissionRun(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return servertest.RunKubectl(podadmissionKubectl, podadmissionHome, podadmissionSrv.Kubeconfig, stdin, args...)
}

// must runs kubectl as admin and fails the test when it fails.
func must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := podadmissionRun(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// clientset is an admin client.
func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := podadmissionSrv.Config()
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
	ca, err := pki.LoadCA(filepath.Join(podadmissionSrv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClientCert(user, groups, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := pki.WriteKubeconfig(path, podadmissionSrv.URL, ca.CAPEM, certPEM, keyPEM, user); err != nil {
		t.Fatal(err)
	}
	return path
}
