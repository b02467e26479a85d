package ctl

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/internal/server/servertest"
)

// TestOpsAPIInDiscovery: kubectl lists the ops API's resources (aggregated discovery, and
// the legacy per-version document a client without it reads).
func TestOpsAPIInDiscovery(t *testing.T) {
	ctlSuite.Need(t)
	k := newKubectl(t)
	out := k.ok(t, "", "api-resources", "--api-group", opsapi.Group, "-o", "wide")
	for _, r := range []string{opsapi.ResourceHealths, opsapi.ResourceGraphs, opsapi.ResourceAuditEvents, opsapi.ResourceObjects} {
		if !regexp.MustCompile(`(?m)^` + r + `\s.*` + regexp.QuoteMeta(opsapi.Group+"/"+opsapi.Version) + `\s+true\s`).MatchString(out) {
			t.Errorf("kubectl api-resources does not list %s as namespaced in %s:\n%s", r, opsapi.Group, out)
		}
	}
	var list metav1.APIResourceList
	raw := k.ok(t, "", "get", "--raw", "/apis/"+opsapi.Group+"/"+opsapi.Version)
	if err := json.Unmarshal([]byte(raw), &list); err != nil || list.GroupVersion != opsapi.Group+"/"+opsapi.Version || len(list.APIResources) != 4 {
		t.Errorf("legacy discovery of %s/%s: %v\n%s", opsapi.Group, opsapi.Version, err, raw)
	}
	var groups metav1.APIGroupList
	raw = k.ok(t, "", "get", "--raw", "/apis")
	if err := json.Unmarshal([]byte(raw), &groups); err != nil {
		t.Fatalf("/apis: %v", err)
	}
	found := false
	for _, g := range groups.Groups {
		if g.Name == opsapi.Group && g.PreferredVersion.Version == opsapi.Version {
			found = true
		}
	}
	if !found {
		t.Errorf("/apis does not list %s:\n%s", opsapi.Group, raw)
	}
	var group metav1.APIGroup
	raw = k.ok(t, "", "get", "--raw", "/apis/"+opsapi.Group)
	if err := json.Unmarshal([]byte(raw), &group); err != nil || group.Name != opsapi.Group {
		t.Errorf("/apis/%s: %v\n%s", opsapi.Group, err, raw)
	}
	// Discovery of every group still works as a whole (kubectl would warn of a group it
	// could not read).
	if _, errOut, err := k.run(srv.Kubeconfig, "", "api-resources"); err != nil || errOut != "" {
		t.Errorf("kubectl api-resources: %v\n%s", err, errOut)
	}
}

// TestHealthWatchRedraws: health -w redraws from the kinds' watches (no polling: --interval 0)
// when an object in the scope is created.
func TestHealthWatchRedraws(t *testing.T) {
	ctlSuite.Need(t)
	k := newKubectl(t)
	k.ok(t, "", "create", "namespace", "healthw")
	cmd := exec.Command(kubeBin, "ctl", "--kubeconfig", srv.Kubeconfig, "health", "-n", "healthw", "-w", "--interval", "0")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var out servertest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// The last table's Credential TOTAL column.
	credTotal := func() (int, error) {
		s := out.String()
		i := strings.LastIndex(s, "KIND ")
		if i < 0 {
			return 0, fmt.Errorf("no table yet:\n%s", s)
		}
		m := regexp.MustCompile(`(?m)^Credential\s+(\d+)\s`).FindStringSubmatch(s[i:])
		if m == nil {
			return 0, fmt.Errorf("no Credential row in the last table:\n%s", s[i:])
		}
		var n int
		_, err := fmt.Sscan(m[1], &n)
		return n, err
	}
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if n, err := credTotal(); err != nil || n != 0 {
			return fmt.Errorf("first draw: %d credentials, %v", n, err)
		}
		return nil
	})
	k.apply(t, "apiVersion: kubeos.dev/v1alpha1\nkind: Credential\nmetadata: {name: watched, namespace: healthw}\nspec: {type: password}\n")
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if n, err := credTotal(); err != nil || n != 1 {
			return fmt.Errorf("no redraw with the new Credential (%d, %v):\n%s", n, err, out.String())
		}
		return nil
	})
	if r := ctl(t, srv.Kubeconfig, "health", "-w", "--interval", "-1s"); r.code != 1 || !strings.Contains(r.err, "--interval -1s") {
		t.Errorf("health -w --interval -1s: %s", r)
	}
}
