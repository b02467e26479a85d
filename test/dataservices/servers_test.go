package dataservices

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// Shared helpers of the package's tests (H4's and H5's too): the admin client, tenants'
// kubeconfigs, kubectl 1.33, server entries.

var (
	// admin is a client as cluster-admin.
	admin client.Client
	// aliceKubeconfig is an admin of tenant acme (namespace acme-dev), bobKubeconfig of
	// tenant globex (namespace globex-dev).
	aliceKubeconfig, bobKubeconfig string
	kubectlBin                     string
)

// Namespaces of the two tenants.
const (
	acmeNS   = "acme-dev"
	globexNS = "globex-dev"
)

func setup() error {
	var err error
	if kubectlBin, err = servertest.FindKubectl("1.33"); err != nil {
		return err
	}
	cfg, err := srv.Config()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ctx := context.Background()
	if err := registerServer(ctx, "pg-main", servers.PostgreSQL, pg.URL, true, ""); err != nil {
		return err
	}
	if err := registerServer(ctx, "redis-main", servers.Redis, rd.URL, true, ""); err != nil {
		return err
	}
	// An entry only tenant globex may use.
	if err := registerServer(ctx, "pg-globex", servers.PostgreSQL, pg.URL, false, "globex"); err != nil {
		return err
	}
	for tenant, user := range map[string]string{"acme": "alice", "globex": "bob"} {
		t := &v1alpha1.Tenant{}
		t.Name = tenant
		t.Spec.Environments = []string{"dev"}
		t.Spec.Admins = []v1alpha1.Subject{{Kind: "User", Name: user}}
		if err := admin.Create(ctx, t); err != nil {
			return fmt.Errorf("tenant %s: %w", tenant, err)
		}
	}
	if aliceKubeconfig, err = kubeconfigFor("alice"); err != nil {
		return err
	}
	if bobKubeconfig, err = kubeconfigFor("bob"); err != nil {
		return err
	}
	// Wait until both tenants' admins may create Databases in their namespace.
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range []struct{ kc, ns string }{{aliceKubeconfig, acmeNS}, {bobKubeconfig, globexNS}} {
		for {
			out, _, err := servertest.RunKubectl(kubectlBin, dataDir, c.kc, "", "auth", "can-i", "create", "databases.kubeos.dev", "-n", c.ns)
			if err == nil && strings.TrimSpace(out) == "yes" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("tenant admin cannot create databases in %s: %q %v", c.ns, out, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// registerServer registers a server entry (a kubeos.dev/server Secret in kube-system).
func registerServer(ctx context.Context, name, kind, url string, isDefault bool, tenants string) error {
	s := &corev1.Secret{Type: servers.SecretType, Data: map[string][]byte{servers.KeyURL: []byte(url)}}
	s.Namespace, s.Name = servers.Namespace, name
	s.Labels = map[string]string{servers.LabelKind: kind}
	s.Annotations = map[string]string{}
	if isDefault {
		s.Annotations[servers.AnnotationDefault] = "true"
	}
	if tenants != "" {
		s.Annotations[servers.AnnotationTenants] = tenants
	}
	if err := admin.Create(ctx, s); err != nil {
		return fmt.Errorf("register %s: %w", name, err)
	}
	return nil
}

// kubeconfigFor writes a kubeconfig for user (a client certificate from the server's CA).
func kubeconfigFor(user string, groups ...string) (string, error) {
	cfg, err := srv.Inner().LoopbackConfig(user, groups...)
	if err != nil {
		return "", err
	}
	return writeKubeconfig(cfg, filepath.Join(dataDir, user+".kubeconfig"))
}

func writeKubeconfig(cfg *rest.Config, path string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "user"}
	kc.CurrentContext = "kube"
	return path, clientcmd.WriteToFile(*kc, path)
}

// kubectl runs kubectl 1.33 with kubeconfig.
func kubectl(t *testing.T, kubeconfig, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return servertest.RunKubectl(kubectlBin, t.TempDir(), kubeconfig, stdin, args...)
}

// apply applies yaml as kubeconfig's user; the test fails when it is refused.
func apply(t *testing.T, kubeconfig, yaml string) {
	t.Helper()
	if _, errOut, err := kubectl(t, kubeconfig, yaml, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v: %s", err, errOut)
	}
}

// refused applies yaml and wants it refused with an error containing each of want.
func refused(t *testing.T, kubeconfig, yaml string, want ...string) {
	t.Helper()
	_, errOut, err := kubectl(t, kubeconfig, yaml, "create", "-f", "-")
	if err == nil {
		t.Fatalf("created; want refused with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Fatalf("refused with %q; want it to contain %q", errOut, w)
		}
	}
}

// jsonpath reads one field with kubectl get -o jsonpath ("" when absent or failing).
func jsonpath(t *testing.T, kubeconfig, path string, args ...string) string {
	t.Helper()
	out, _, _ := kubectl(t, kubeconfig, "", append([]string{"get", "-o", "jsonpath=" + path}, args...)...)
	return out
}

// waitFor polls jsonpath until it equals want.
func waitFor(t *testing.T, kubeconfig string, d time.Duration, path, want string, args ...string) {
	t.Helper()
	var got string
	deadline := time.Now().Add(d)
	for {
		if got = jsonpath(t, kubeconfig, path, args...); got == want {
			return
		}
		if time.Now().After(deadline) {
			desc, _, _ := kubectl(t, kubeconfig, "", append([]string{"get", "-o", "yaml"}, args...)...)
			t.Fatalf("%v %s = %q after %s, want %q\n%s", args, path, got, d, want, desc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventually polls f until it returns nil.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	servertest.Eventually(t, d, 100*time.Millisecond, f)
}

// secretData reads a Secret's data as admin.
func secretData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	var s corev1.Secret
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("secret %s/%s: %v", ns, name, err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// psql runs psql (Debian's client) with uri and sql; it returns the output, trimmed.
func psql(uri, sql string) (string, error) {
	cmd := exec.Command("psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", uri, "-c", sql)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=5")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("psql: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
