package security

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/cli"
)

func restHTTPClient(cfg *rest.Config) (interface {
	Do(*http.Request) (*http.Response, error)
}, error) {
	return rest.HTTPClientFor(cfg)
}

// rawSecret reads a Secret's stored value straight from etcd.
func rawSecret(t *testing.T, ns, name string) []byte {
	t.Helper()
	resp, err := admissionSrv.Inner().Store.Client().Get(context.Background(), "/registry/core/secrets/"+ns+"/"+name)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get: %v (%d keys)", err, len(resp.Kvs))
	}
	return resp.Kvs[0].Value
}

// TestEncryptionAtRest: Secrets are stored sealed (aescbc, upstream's format), read back
// through the API, list and watch; after a key rotation `kube encryption rewrite` moves
// them to the new key, and the old key can go.
func TestEncryptionAtRest(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "enc")
	w, err := cs.CoreV1().Secrets("enc").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	_, err = cs.CoreV1().Secrets("enc").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"password": "correct-horse-battery"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := rawSecret(t, "enc", "db")
	if !bytes.HasPrefix(raw, []byte("k8s:enc:aescbc:v1:key1:")) || bytes.Contains(raw, []byte("correct-horse-battery")) || bytes.Contains(raw, []byte("Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5")) {
		t.Fatalf("stored value is readable: %q", raw)
	}
	check := func() {
		t.Helper()
		s, err := cs.CoreV1().Secrets("enc").Get(ctx, "db", metav1.GetOptions{})
		if err != nil || string(s.Data["password"]) != "correct-horse-battery" {
			t.Fatalf("get: %v %v", s, err)
		}
		l, err := cs.CoreV1().Secrets("enc").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 || string(l.Items[0].Data["password"]) != "correct-horse-battery" {
			t.Fatalf("list: %v", err)
		}
	}
	check()
	ev := <-w.ResultChan()
	if s, ok := ev.Object.(*corev1.Secret); !ok || string(s.Data["password"]) != "correct-horse-battery" {
		t.Fatalf("watch event: %v", ev)
	}
	// ConfigMaps are not listed: stored in plain JSON.
	if _, err := createCM("enc", "plain"); err != nil {
		t.Fatal(err)
	}
	resp, err := admissionSrv.Inner().Store.Client().Get(ctx, "/registry/core/configmaps/enc/plain")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Value[0] != '{' {
		t.Fatalf("configmap stored as %v %v", resp, err)
	}

	// Rotation: key2 writes, key1 still reads.
	if err := os.WriteFile(encPath, []byte(encryptionConfig("      - {name: key2, secret: "+key2+"}\n      - {name: key1, secret: "+key1+"}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	restart(t)
	check()
	if raw := rawSecret(t, "enc", "db"); !bytes.HasPrefix(raw, []byte("k8s:enc:aescbc:v1:key1:")) {
		t.Fatalf("before the rewrite: %q", raw[:30])
	}
	var out bytes.Buffer
	root := cli.NewCommand(&out, &out)
	root.SetArgs([]string{"encryption", "rewrite", "--kubeconfig", admissionSrv.Kubeconfig, "--resources", "secrets"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("kube encryption rewrite: %v\n%s", err, out.String())
	}
	if raw := rawSecret(t, "enc", "db"); !bytes.HasPrefix(raw, []byte("k8s:enc:aescbc:v1:key2:")) {
		t.Fatalf("after the rewrite: %q (%s)", raw[:30], out.String())
	}
	// The old key goes: everything still reads.
	if err := os.WriteFile(encPath, []byte(encryptionConfig("      - {name: key2, secret: "+key2+"}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	restart(t)
	check()
	n, err := cli.RewriteResource(ctx, dyn, schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	if err != nil || n == 0 {
		t.Fatalf("rewrite after removal: %d %v", n, err)
	}
}

func restart(t *testing.T) {
	t.Helper()
	if err := admissionSrv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := connect(); err != nil {
		t.Fatal(err)
	}
}
