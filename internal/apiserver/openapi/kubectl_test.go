package openapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kubeos.dev/kube/internal/apiserver/discovery"
	"kubeos.dev/kube/internal/registry"
)

// kubectlBinary finds kubectl 1.<minor> beside the default kubectl (the google-cloud-cli
// layout), or skips the test.
func kubectlBinary(t *testing.T, minor int) string {
	t.Helper()
	def, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	if real, err := filepath.EvalSymlinks(def); err == nil {
		def = real
	}
	bin := filepath.Join(filepath.Dir(def), fmt.Sprintf("kubectl.1.%d", minor))
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("kubectl 1.%d not installed", minor)
	}
	return bin
}

// TestKubectl runs kubectl explain and create -f (which validates with the OpenAPI
// documents) against the discovery and OpenAPI handlers. Both kubectl versions find
// fieldValidation on PATCH in /openapi/v3 and leave unknown-field checks to the server;
// the client-side check of the v2 models is TestV2ProtobufModelsAndValidation.
func TestKubectl(t *testing.T) {
	reg := newRegistry(append(registry.Builtins(), testKinds()[1])...)
	mux := http.NewServeMux()
	d := discovery.New(reg)
	for _, p := range []string{"/api", "/api/", "/apis", "/apis/"} {
		mux.Handle(p, d)
	}
	mux.Handle("/openapi/", New(reg))
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"33","gitVersion":"v1.33.0","platform":"linux/amd64"}`)
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	goodCM := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(goodCM, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	run := func(bin string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, minor := range []int{27, 33} {
		t.Run(fmt.Sprintf("1.%d", minor), func(t *testing.T) {
			bin := kubectlBinary(t, minor)
			out, err := run(bin, "explain", "configmap.data")
			if err != nil || !strings.Contains(out, "FIELD: data") && !strings.Contains(out, "FIELD:    data") {
				t.Errorf("explain configmap.data: %v\n%s", err, out)
			}
			out, err = run(bin, "explain", "widgets.spec.color")
			if err != nil || !strings.Contains(out, "Color of the widget") {
				t.Errorf("explain widgets.spec.color: %v\n%s", err, out)
			}
			out, err = run(bin, "create", "--dry-run=client", "-o", "name", "-f", goodCM)
			if err != nil {
				t.Errorf("create valid ConfigMap: %v\n%s", err, out)
			}
		})
	}
}
