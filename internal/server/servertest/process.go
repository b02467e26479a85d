package servertest

import (
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest/kubeproc"
)

// The process helpers live in kubeproc (which does not link the server); these forward to
// them for the packages that also start a server in-process.

// Buffer is a bytes.Buffer safe for concurrent writes (a server's log).
type Buffer = kubeproc.Buffer

// TempDir makes a directory for a server outside of any single test's lifetime (TestMain).
func TempDir() (string, error) { return kubeproc.TempDir() }

// FindKubectl is [kubeproc.FindKubectl].
func FindKubectl(version string) (string, error) { return kubeproc.FindKubectl(version) }

// RunKubectl is [kubeproc.RunKubectl].
func RunKubectl(bin, home, kubeconfig, stdin string, args ...string) (stdout, stderr string, err error) {
	return kubeproc.RunKubectl(bin, home, kubeconfig, stdin, args...)
}

// Eventually is [kubeproc.Eventually].
func Eventually(t testing.TB, d, interval time.Duration, f func() error) {
	t.Helper()
	kubeproc.Eventually(t, d, interval, f)
}

// BuildKube is [kubeproc.BuildKube].
func BuildKube(t testing.TB, dir string) string {
	t.Helper()
	return kubeproc.BuildKube(t, dir)
}

// KubeBinary is [kubeproc.KubeBinary].
func KubeBinary() (string, error) { return kubeproc.KubeBinary() }
