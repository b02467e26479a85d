package workload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

// selfSignedCA is a new CA certificate in PEM.
func selfSignedCA(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// bundleSubjects are the common names of a PEM bundle's certificates.
func bundleSubjects(bundle string) []string {
	var out []string
	rest := []byte(bundle)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c.Subject.CommonName)
		}
	}
}

// TestAggregationAuthTrust (issue 21, item 5): kube-system/extension-apiserver-authentication
// is the union of what every API server of the cluster trusts, as kube-apiserver's
// ClusterAuthenticationTrust controller keeps it. Another server with other CAs (a
// different front-proxy CA) writes its own data over the ConfigMap; Kube adds its CAs and
// request-header settings back without dropping the other server's; deleted, the
// ConfigMap comes back with Kube's part.
func TestAggregationAuthTrust(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cms := clientset(t).CoreV1().ConfigMaps("kube-system")
	orig, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	own := maps.Clone(orig.Data)
	kubeCAs, kubeProxyCAs := bundleSubjects(own["client-ca-file"]), bundleSubjects(own["requestheader-client-ca-file"])
	if len(kubeCAs) == 0 || len(kubeProxyCAs) == 0 || own["requestheader-allowed-names"] != `["front-proxy-client"]` {
		t.Fatalf("Kube's own data: %v", own)
	}
	t.Cleanup(func() {
		// Deleted, the ConfigMap is written again by Kube alone.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cms.Delete(ctx, "extension-apiserver-authentication", metav1.DeleteOptions{}); err != nil {
			t.Error(err)
			return
		}
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			cm, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !maps.Equal(cm.Data, own) {
				return fmt.Errorf("recreated with %v", cm.Data)
			}
			return nil
		})
	})

	// Another server overwrites the ConfigMap with its own CAs and settings only.
	other := map[string]string{
		"client-ca-file":                     selfSignedCA(t, "other-ca"),
		"requestheader-client-ca-file":       selfSignedCA(t, "other-front-proxy-ca"),
		"requestheader-allowed-names":        `["other-proxy"]`,
		"requestheader-username-headers":     `["X-Other-User"]`,
		"requestheader-group-headers":        `["X-Other-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Other-Extra-"]`,
	}
	cm := orig.DeepCopy()
	cm.Data = other
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"requestheader-allowed-names":        `["other-proxy","front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Other-User","X-Remote-User"]`,
		"requestheader-uid-headers":          `["X-Remote-Uid"]`,
		"requestheader-group-headers":        `["X-Other-Group","X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Other-Extra-","X-Remote-Extra-"]`,
	}
	check := func() error {
		cm, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got, want := bundleSubjects(cm.Data["client-ca-file"]), append([]string{"other-ca"}, kubeCAs...); !slices.Equal(got, want) {
			return fmt.Errorf("client-ca-file holds %v, want %v", got, want)
		}
		if got, want := bundleSubjects(cm.Data["requestheader-client-ca-file"]), append([]string{"other-front-proxy-ca"}, kubeProxyCAs...); !slices.Equal(got, want) {
			return fmt.Errorf("requestheader-client-ca-file holds %v, want %v", got, want)
		}
		for k, v := range want {
			if cm.Data[k] != v {
				return fmt.Errorf("%s is %s, want %s", k, cm.Data[k], v)
			}
		}
		if len(cm.Data) != 7 {
			return fmt.Errorf("keys %v", sortedKeys(cm.Data))
		}
		return nil
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, check)
}
