package apps

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// helmVersion is the Helm release the tests run (the newest v3 the module proxy serves).
const helmVersion = "v3.22.0"

// helmBinary builds helm.sh/helm/v3/cmd/helm@helmVersion into a scratch module under the
// system temp dir, once: later runs find the binary there.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "kube-test-helm-"+helmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	steps := [][]string{
		{"go", "mod", "init", "helmbuild"},
		{"go", "get", "helm.sh/helm/v3/cmd/helm@" + helmVersion},
		{"go", "build", "-o", bin + ".tmp", "helm.sh/helm/v3/cmd/helm"},
	}
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err == nil {
		steps = steps[1:]
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", s, err, out)
		}
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
