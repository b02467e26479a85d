package apps

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"kubeos.dev/kube/internal/server/servertest"
)

func tokenSecret(id, secret string, expires time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.BootstrapTokenSecretPrefix + id, Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenExpirationKey:       expires.UTC().Format(time.RFC3339),
		},
	}
}

// TestBootstrapTokens: kube-public/cluster-info names the server and its CA and is signed
// with every signing bootstrap token (a signature a joining node can check with its
// token); an expired token is deleted and its signature removed.
func TestBootstrapTokens(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	secrets := cs.CoreV1().Secrets(metav1.NamespaceSystem)
	if _, err := secrets.Create(ctx, tokenSecret("abcdef", "0123456789abcdef", time.Now().Add(time.Hour)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = secrets.Delete(ctx, "bootstrap-token-abcdef", metav1.DeleteOptions{}) })
	// expires a few seconds from now
	if _, err := secrets.Create(ctx, tokenSecret("zyxwvu", "fedcba9876543210", time.Now().Add(3*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var kubeconfig string
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		cm, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kubeconfig = cm.Data[bootstrapapi.KubeConfigKey]
		sig := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+"abcdef"]
		if sig == "" {
			return fmt.Errorf("cluster-info has no signature for token abcdef: %v", keys(cm.Data))
		}
		if !jws.DetachedTokenIsValid(sig, kubeconfig, "abcdef", "0123456789abcdef") {
			return fmt.Errorf("signature of token abcdef does not verify")
		}
		if jws.DetachedTokenIsValid(sig, kubeconfig, "abcdef", "0123456789abcdeX") {
			return fmt.Errorf("signature verifies with a wrong secret")
		}
		return nil
	})
	// a joining node may read it without credentials (kubeadm's Role for system:anonymous;
	// Kube's authenticator refusing anonymous requests is outside these controllers)
	for _, tc := range []struct {
		name string
		want bool
	}{{bootstrapapi.ConfigMapClusterInfo, true}, {"kube-root-ca.crt", false}} {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:anonymous", Groups: []string{"system:unauthenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: metav1.NamespacePublic, Verb: "get", Resource: "configmaps", Name: tc.name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.want {
			t.Errorf("system:anonymous get configmaps/%s in kube-public: allowed %v, want %v", tc.name, r.Status.Allowed, tc.want)
		}
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		if c.Server != clusterSrv.URL || !strings.Contains(string(c.CertificateAuthorityData), "BEGIN CERTIFICATE") {
			t.Errorf("cluster-info cluster: server %q (want %q), CA %d bytes", c.Server, clusterSrv.URL, len(c.CertificateAuthorityData))
		}
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		_, err := secrets.Get(ctx, "bootstrap-token-zyxwvu", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("expired token still there: %v", err)
		}
		cm, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+"zyxwvu"]; ok {
			return fmt.Errorf("signature of the expired token still in cluster-info")
		}
		return nil
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
