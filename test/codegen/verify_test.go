package codegen

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGeneratedClientsUpToDate regenerates pkg/client into a temporary directory with
// hack/update-codegen.sh --verify and fails with the diff when the checked-in code differs
// (a type, field or +genclient tag changed without regenerating).
func TestGeneratedClientsUpToDate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "update-codegen.sh"), "--verify")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/update-codegen.sh --verify: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "pkg/client is up to date") {
		t.Fatalf("hack/update-codegen.sh --verify did not report up to date:\n%s", out)
	}
}
