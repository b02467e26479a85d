package api

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest"
)

// kubectlRun runs one kubectl binary with its own HOME and discovery cache.
type kubectlRun struct {
	t    *testing.T
	bin  string
	home string
}

func (k *kubectlRun) run(stdin string, args ...string) (string, error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + k.home, "KUBECONFIG=" + crdSrv.Kubeconfig, "KUBECACHEDIR=" + filepath.Join(k.home, "cache")}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	k.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// ok runs kubectl and fails the test if it fails.
func (k *kubectlRun) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fails runs kubectl, expects it to fail and its output to hold every want.
func (k *kubectlRun) fails(stdin string, wants []string, args ...string) {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err == nil {
		k.t.Fatalf("kubectl %s succeeded, want a failure", strings.Join(args, " "))
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			k.t.Errorf("kubectl %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
}

// TestDatabaseWithKubectl is the "Done when" with the Database example, once per
// kubectl version, each in its own namespace.
func TestDatabaseWithKubectl(t *testing.T) {
	crdSuite.Need(t)
	for _, v := range []string{"1.27", "1.33"} {
		t.Run("kubectl-"+v, func(t *testing.T) {
			bin, err := findKubectl(v)
			if err != nil {
				t.Fatal(err)
			}
			k := &kubectlRun{t: t, bin: bin, home: t.TempDir()}
			ns := "db-" + strings.ReplaceAll(v, ".", "")
			testDatabase(t, k, ns)
		})
	}
}

func testDatabase(t *testing.T, k *kubectlRun, ns string) {
	// A new user applies the file: the Database may fail the first time (the CRD is not
	// established yet, as with kube-apiserver), and succeeds after the wait.
	_, _ = k.run("", "apply", "-f", "testdata/database-crd.yaml")
	k.ok("", "wait", "--for", "condition=Established", "crd/databases.db.example.com", "--timeout=30s")
	k.ok("", "apply", "-f", "testdata/database-crd.yaml")
	if got := k.ok("", "get", "db", "order-db", "-n", "default", "-o", "jsonpath={.spec.storageSize} {.spec.backup.enabled} {.metadata.generation}"); got != "100Gi true 1" {
		t.Errorf("order-db: %q, want %q", got, "100Gi true 1")
	}
	k.ok("", "create", "namespace", ns)

	// Defaults: storageSize and backup.enabled.
	k.ok(`apiVersion: db.example.com/v1alpha1
kind: Database
metadata: {name: small}
spec: {engine: mysql, version: "8.0", replicas: 1, backup: {retentionDays: 3}}
`, "create", "-n", ns, "-f", "-")
	if got := k.ok("", "get", "db", "small", "-n", ns, "-o", "jsonpath={.spec.storageSize} {.spec.backup.enabled}"); got != "10Gi false" {
		t.Errorf("defaults: %q, want %q", got, "10Gi false")
	}

	// Every violated field is listed.
	k.fails(`apiVersion: db.example.com/v1alpha1
kind: Database
metadata: {name: bad}
spec: {engine: oracle, replicas: 9, storageSize: 10Mi}
`, []string{`The Database "bad" is invalid`,
		`spec.engine: Unsupported value: "oracle": supported values: "postgresql", "mysql", "mongodb"`,
		`spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 7`,
		`spec.storageSize: Invalid value: "10Mi": spec.storageSize in body should match '^[0-9]+(Gi|Ti)$'`,
		`spec.version: Required value`}, "create", "-n", ns, "-f", "-")
	k.fails(`apiVersion: db.example.com/v1alpha1
kind: Database
metadata: {name: bad}
spec: {engine: mysql, version: "1", replicas: 0, backup: {enabled: true}}
`, []string{`spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1`,
		"backup.schedule is required when backup.enabled is true"}, "create", "-n", ns, "-f", "-")
	// Unknown fields: refused under kubectl's default Strict validation, a warning under Warn.
	unknown := `apiVersion: db.example.com/v1alpha1
kind: Database
metadata: {name: extra}
spec: {engine: mysql, version: "1", replicas: 1, colour: blue}
`
	k.fails(unknown, []string{`unknown field "spec.colour"`}, "create", "-n", ns, "-f", "-")
	if out := k.ok(unknown, "create", "-n", ns, "--validate=warn", "-f", "-"); !strings.Contains(out, `Warning: unknown field "spec.colour"`) {
		t.Errorf("no warning for the unknown field:\n%s", out)
	}
	if got := k.ok("", "get", "db", "extra", "-n", ns, "-o", "jsonpath={.spec}"); strings.Contains(got, "colour") {
		t.Errorf("unknown field not pruned: %s", got)
	}

	// Printer columns.
	out := k.ok("", "get", "db", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+ENGINE\s+VERSION\s+REPLICAS\s+PHASE\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^small\s+mysql\s+8\.0\s+1\s+<none>\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get db: want the printer columns, got:\n%s", out)
	}

	// explain on a custom resource field.
	out = k.ok("", "explain", "databases.spec.backup")
	for _, w := range []string{"KIND:", "Database", "enabled", "schedule", "retentionDays"} {
		if !strings.Contains(out, w) {
			t.Errorf("explain lacks %q:\n%s", w, out)
		}
	}

	// scale, then status-only and spec-only writes.
	k.ok("", "scale", "--replicas=3", "db/small", "-n", ns)
	if got := k.ok("", "get", "db", "small", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("after scale: replicas %q, want 3", got)
	}
	k.ok("", "patch", "db", "small", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready","readyReplicas":3},"spec":{"replicas":5}}`)
	k.ok("", "patch", "db", "small", "-n", ns, "--type=merge", "-p", `{"status":{"phase":"Broken"},"spec":{"replicas":2}}`)
	if got := k.ok("", "get", "db", "small", "-n", ns, "-o", "jsonpath={.spec.replicas} {.status.phase} {.status.readyReplicas}"); got != "2 Ready 3" {
		t.Errorf("status/spec split: %q, want %q", got, "2 Ready 3")
	}
	out = k.ok("", "get", "db", "small", "-n", ns)
	if !regexp.MustCompile(`(?m)^small\s+mysql\s+8\.0\s+2\s+Ready\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get db after the writes:\n%s", out)
	}
	k.ok("", "delete", "namespace", ns, "--wait=false")
}

var findKubectl = servertest.FindKubectl
