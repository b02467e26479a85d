package lifecycle

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	kubeosscheme "kubeos.dev/kube/pkg/client/clientset/versioned/scheme"
)

// TestTenantVolumeWithKubectl: a tenant's admin, with kubectl 1.33, creates a Volume in the
// tenant's namespace, sees it Active with its claim, is refused a shrink (422) and deletes
// it.
func TestTenantVolumeWithKubectl(t *testing.T) {
	volumeSuite.Need(t)
	ctx := context.Background()
	cfg, err := volumeSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: kubeosscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	tenant := &v1alpha1.Tenant{}
	tenant.Name = "volt"
	tenant.Spec.Environments = []string{"dev"}
	tenant.Spec.Admins = []v1alpha1.Subject{{Kind: "User", Name: "vera"}}
	if err := admin.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), tenant) })
	ucfg, err := volumeSrv.Inner().LoopbackConfig("vera")
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: ucfg.Host, CertificateAuthorityData: ucfg.CAData}
	kc.AuthInfos["vera"] = &clientcmdapi.AuthInfo{ClientCertificateData: ucfg.CertData, ClientKeyData: ucfg.KeyData}
	kc.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "vera"}
	kc.CurrentContext = "kube"
	kubeconfig := filepath.Join(t.TempDir(), "vera.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	bin, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	kubectl := func(stdin string, args ...string) (string, string, error) {
		return servertest.RunKubectl(bin, home, kubeconfig, stdin, args...)
	}
	const ns = "volt-dev"
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		out, errOut, err := kubectl("", "auth", "can-i", "create", "volumes.kubeos.dev", "-n", ns)
		if strings.TrimSpace(out) != "yes" {
			return fmt.Errorf("can-i create volumes: %q %s %v", out, errOut, err)
		}
		return nil
	})
	yaml := "apiVersion: kubeos.dev/v1alpha1\nkind: Volume\nmetadata: {name: files, namespace: volt-dev}\nspec: {size: 10Mi, deletionPolicy: Delete}\n"
	if _, errOut, err := kubectl(yaml, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v: %s", err, errOut)
	}
	servertest.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		out, errOut, err := kubectl("", "get", "volume", "files", "-n", ns, "-o", "jsonpath={.status.phase} {.status.claimName}")
		if out != "Active files-volume" {
			return fmt.Errorf("volume: %q %s %v", out, errOut, err)
		}
		return nil
	})
	if out, errOut, err := kubectl("", "get", "kvol", "-n", ns); err != nil || !strings.Contains(out, "files-volume") || !strings.Contains(out, "local-path") {
		t.Fatalf("kubectl get kvol: %q %s %v", out, errOut, err)
	}
	if out, errOut, err := kubectl("", "get", "pvc", "files-volume", "-n", ns, "-o", "jsonpath={.spec.storageClassName}"); err != nil || out != "local-path" {
		t.Fatalf("the tenant's claim: %q %s %v", out, errOut, err)
	}
	_, errOut, err := kubectl("", "patch", "volume", "files", "-n", ns, "--type=merge", "-p", `{"spec":{"size":"5Mi"}}`)
	if err == nil || !strings.Contains(errOut, "cannot shrink") || !strings.Contains(errOut, "is invalid") {
		t.Fatalf("shrink: %v: %s, want a 422 (is invalid: cannot shrink)", err, errOut)
	}
	if _, errOut, err := kubectl("", "delete", "volume", "files", "-n", ns, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("delete: %v: %s", err, errOut)
	}
	servertest.Eventually(t, time.Minute, 250*time.Millisecond, func() error {
		out, errOut, err := kubectl("", "get", "pvc", "-n", ns, "-o", "name")
		if err != nil || strings.Contains(out, "files-volume") {
			return fmt.Errorf("claims after Delete: %q %s %v", out, errOut, err)
		}
		return nil
	})
}
