package filters_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/rbac"
)

// BenchmarkChainAuth measures what authentication and authorization add to a request in the
// filter chain (no network, no handler work): a configmap create by a client certificate
// user, with no authorizer; with RBAC as system:masters; with RBAC as a user whose
// RoleBinding grants edit, among 10,000 other Roles and RoleBindings; and as system:masters
// with the request metrics the server records.
func BenchmarkChainAuth(b *testing.B) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(user string, groups ...string) *x509.Certificate {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		t := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, _ := x509.CreateCertificate(rand.Reader, t, ca, &k.PublicKey, caKey)
		c, _ := x509.ParseCertificate(der)
		return c
	}
	var roles []*rbacv1.Role
	var bindings []*rbacv1.RoleBinding
	for i := range 10000 {
		ns := fmt.Sprintf("ns-%d", i%100)
		roles = append(roles, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("r", i)},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}})
		bindings = append(bindings, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("b", i)},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: fmt.Sprint("r", i)}, Subjects: []rbacv1.Subject{{Kind: "User", Name: fmt.Sprint("u", i)}}})
	}
	bindings = append(bindings, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-7", Name: "alice-edit"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}})
	cr := rbac.BootstrapClusterRoles()
	for range 3 {
		for _, r := range cr {
			if r.AggregationRule != nil {
				r.Rules = rbac.AggregatedRules(r, cr)
			}
		}
	}
	authz := rbac.NewAuthorizer()
	authz.SetSnapshot(rbac.Build(roles, cr, bindings, rbac.BootstrapClusterRoleBindings()))

	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	x509a := filters.X509{Roots: pool, Cache: &filters.VerifyCache{}}
	for _, c := range []struct {
		name    string
		cert    *x509.Certificate
		authz   filters.Authorizer
		metrics bool
	}{
		{"authn-only", leaf("alice"), nil, false},
		{"rbac-masters", leaf("admin", "system:masters"), authz, false},
		{"rbac-rolebinding", leaf("alice"), authz, false},
		// As the server runs it: with the request metrics.
		{"rbac-masters-metrics", leaf("admin", "system:masters"), authz, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := filters.Options{Authenticators: []filters.Authenticator{x509a}, Authorizer: c.authz}
			if c.metrics {
				o.Metrics = filters.NewMetrics(prometheus.NewRegistry())
			}
			h := filters.Chain(ok, o)
			req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ns-7/configmaps", nil)
			req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.cert}}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusCreated {
					b.Fatalf("code %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
