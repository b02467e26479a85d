package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/pki"
)

// certPEM signs a client certificate for user with the CA (caCert, caKey), valid in
// [notBefore, notAfter].
func certPEM(t *testing.T, caCert *x509.Certificate, caKey any, user string, notBefore, notAfter time.Time, groups ...string) (certOut, keyOut []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// foreignCA is a self-signed CA the server does not know.
func foreignCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// TestUnauthenticated: no credentials, an expired certificate, a certificate of another CA
// (certificates claiming claiming system:masters), an unknown or forged bearer token → 401 Unauthorized
// on a resource; health and version stay open.
func TestUnauthenticated(t *testing.T) {
	securitySuite.Need(t)
	ca, err := pki.LoadCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	expiredCert, expiredKey := certPEM(t, ca.CA, ca.CAKey, "expired", now.Add(-48*time.Hour), now.Add(-24*time.Hour), "system:masters")
	fca, fkey := foreignCA(t)
	foreignCert, foreignKey := certPEM(t, fca, fkey, "intruder", now.Add(-time.Hour), now.Add(time.Hour), "system:masters")
	goodCert, goodKey := certPEM(t, ca.CA, ca.CAKey, "fresh", now.Add(-time.Hour), now.Add(time.Hour), "system:masters")

	// A valid service-account token with a forged signature.
	admin := adminClient(t)
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "forge"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	good, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "forge", tokenRequest(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good.Status.Token, ".")
	forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))

	cases := []struct {
		name string
		cfg  func(*rest.Config)
		want int
	}{
		{"no credentials", func(*rest.Config) {}, http.StatusUnauthorized},
		{"expired certificate", func(c *rest.Config) { c.CertData, c.KeyData = expiredCert, expiredKey }, http.StatusUnauthorized},
		{"certificate of another CA", func(c *rest.Config) { c.CertData, c.KeyData = foreignCert, foreignKey }, http.StatusUnauthorized},
		{"unknown bearer token", func(c *rest.Config) { c.BearerToken = "not-a-token" }, http.StatusUnauthorized},
		{"forged service-account token", func(c *rest.Config) { c.BearerToken = forged }, http.StatusUnauthorized},
		{"token for another audience", func(c *rest.Config) { c.BearerToken = otherAudienceToken(t, admin) }, http.StatusUnauthorized},
		{"valid certificate of the CA", func(c *rest.Config) { c.CertData, c.KeyData = goodCert, goodKey }, http.StatusOK},
		{"valid service-account token (view nothing: 403)", func(c *rest.Config) { c.BearerToken = good.Status.Token }, http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig(t)
			c.cfg(cfg)
			cs := kubernetes.NewForConfigOrDie(cfg)
			_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			code := http.StatusOK
			var se apierrors.APIStatus
			if errors.As(err, &se) {
				code = int(se.Status().Code)
			} else if err != nil {
				t.Fatalf("not an API error: %v", err)
			}
			if code != c.want {
				t.Fatalf("list configmaps: code %d (%v), want %d", code, err, c.want)
			}
			if c.want == http.StatusUnauthorized && !apierrors.IsUnauthorized(err) {
				t.Fatalf("want reason Unauthorized, got %v", err)
			}
			// /version and /healthz answer everyone.
			body, err := cs.Discovery().RESTClient().Get().AbsPath("/healthz").DoRaw(ctx)
			if err != nil || string(body) != "ok" {
				t.Fatalf("/healthz: %q, %v", body, err)
			}
			if _, err := cs.Discovery().ServerVersion(); err != nil {
				t.Fatalf("/version: %v", err)
			}
		})
	}
}

func tokenRequest() *authenticationv1.TokenRequest { return &authenticationv1.TokenRequest{} }

// otherAudienceToken is a valid token of the forge ServiceAccount for another audience.
func otherAudienceToken(t *testing.T, admin kubernetes.Interface) string {
	t.Helper()
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(context.Background(), "forge",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"https://vault.example"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestTokenRequestBadInput: TokenRequest refuses a lifetime under 10 minutes, an unknown
// bound object kind and a missing ServiceAccount with upstream's codes.
func TestTokenRequestBadInput(t *testing.T) {
	securitySuite.Need(t)
	ctx := context.Background()
	admin := adminClient(t)
	short := int64(60)
	_, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "forge",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may not specify a duration less than 10 minutes") {
		t.Errorf("expirationSeconds 60: %v", err)
	}
	_, err = admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "forge",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", Name: "x"}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("boundObjectRef ConfigMap: %v", err)
	}
	_, err = admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "nobody", tokenRequest(), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("missing ServiceAccount: %v", err)
	}
	_, err = admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/serviceaccounts/forge/token").DoRaw(ctx)
	if !apierrors.IsMethodNotSupported(err) {
		t.Errorf("GET token: %v", err)
	}
}

// TestForbidden: RBAC denials are 403 with kube-apiserver's messages, for namespaced,
// cluster-scoped and non-resource requests; binding or creating a role with more rights
// than the user holds is 403 (escalation), unless they hold bind; impersonation without
// the impersonate verb is 403.
func TestForbidden(t *testing.T) {
	securitySuite.Need(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := "forbidden-ns"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// carol may read and write roles and rolebindings in ns, and edit configmaps; nothing else.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(name, roleKind, roleName, user string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, bind("carol", "Role", "rbac-writer", "carol"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t)
	cert, key := certPEM(t, mustCA(t).CA, mustCA(t).CAKey, "carol", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	cfg.CertData, cfg.KeyData = cert, key
	carol := kubernetes.NewForConfigOrDie(cfg)
	eventually(t, 10*time.Second, func() error {
		_, err := carol.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	})

	expectForbidden := func(t *testing.T, err error, msg string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("got %v, want 403 Forbidden", err)
		}
		if got := err.(apierrors.APIStatus).Status().Message; got != msg {
			t.Fatalf("message\n got %q\nwant %q", got, msg)
		}
	}
	t.Run("namespaced denial", func(t *testing.T) {
		_, err := carol.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
		expectForbidden(t, err, `secrets "s" is forbidden: User "carol" cannot get resource "secrets" in API group "" in the namespace "forbidden-ns"`)
		_, err = carol.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		expectForbidden(t, err, `configmaps is forbidden: User "carol" cannot create resource "configmaps" in API group "" in the namespace "default"`)
	})
	t.Run("cluster-scope denial", func(t *testing.T) {
		_, err := carol.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
		expectForbidden(t, err, `clusterroles.rbac.authorization.k8s.io is forbidden: User "carol" cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`)
	})
	t.Run("non-resource denial", func(t *testing.T) {
		// client-go does not decode Status bodies of non-resource paths: read it raw.
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(cfg.Host + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st metav1.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Message != `forbidden: User "carol" cannot get path "/metrics"` {
			t.Fatalf("GET /metrics: %d %+v", resp.StatusCode, st)
		}
	})
	t.Run("binding a role with more rights", func(t *testing.T) {
		_, err := carol.RbacV1().RoleBindings(ns).Create(ctx, bind("carol-admin", "ClusterRole", "admin", "carol"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `rolebindings.rbac.authorization.k8s.io "carol-admin" is forbidden: user "carol" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`) {
			t.Fatalf("got %v", err)
		}
		// A role within carol's rights binds; one beyond them is refused.
		small := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader", Namespace: ns}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
		if _, err := carol.RbacV1().Roles(ns).Create(ctx, small, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a role within carol's rights: %v", err)
		}
		big := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader", Namespace: ns}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
		_, err = carol.RbacV1().Roles(ns).Create(ctx, big, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`) {
			t.Fatalf("a role beyond carol's rights: %v", err)
		}
		eventually(t, 10*time.Second, func() error {
			_, err := carol.RbacV1().RoleBindings(ns).Create(ctx, bind("dave-cm", "Role", "cm-reader", "dave"), metav1.CreateOptions{})
			return err
		})
	})
	t.Run("bind verb allows binding", func(t *testing.T) {
		r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "may-bind-admin", Namespace: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{"admin"}, Verbs: []string{"bind"}}}}
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, bind("carol-may-bind", "Role", "may-bind-admin", "carol"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() error {
			_, err := carol.RbacV1().RoleBindings(ns).Create(ctx, bind("erin-admin", "ClusterRole", "admin", "erin"), metav1.CreateOptions{})
			return err
		})
	})
	t.Run("impersonation without the right", func(t *testing.T) {
		icfg := rest.CopyConfig(cfg)
		icfg.Impersonate = rest.ImpersonationConfig{UserName: "kube-admin", Groups: []string{"system:masters"}}
		_, err := kubernetes.NewForConfigOrDie(icfg).CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		expectForbidden(t, err, `users "kube-admin" is forbidden: User "carol" cannot impersonate resource "users" in API group "" at the cluster scope`)
	})
	t.Run("impersonation headers without a user", func(t *testing.T) {
		_, err := carol.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/"+ns+"/configmaps").SetHeader("Impersonate-Group", "system:masters").DoRaw(ctx)
		if !apierrors.IsBadRequest(err) {
			t.Fatalf("got %v, want 400", err)
		}
	})
}

func mustCA(t *testing.T) *pki.PKI {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
