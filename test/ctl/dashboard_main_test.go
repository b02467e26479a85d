package ctl

// The dashboard suite tests the operator dashboard at /ui/ (internal/dashboard) against one
// in-process server with an audit log: plain net/http tests for the login, 401, 403, CSRF
// and escaping rules, and headless Chromium (chromedp) for what a user does in a browser.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/dashboard"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var (
	dashboardSrv *servertest.Server
	dashboardLog servertest.Buffer
	cs           kubernetes.Interface
	dyn          dynamic.Interface
	caPool       *x509.CertPool
)

var dashboardSuite = servertest.NewFixture("dashboard", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources: [{group: kubeos.dev}]\n- level: None\n"), 0o600); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	dashboardSrv, err = servertest.StartWith(filepath.Join(dir, "kube"), &dashboardLog, func(o *server.Options) {
		o.AuditPolicyFile, o.AuditLogPath = policy, filepath.Join(dir, "audit.log")
	})
	if err != nil {
		return fmt.Errorf("dashboard: start server: %w\n%s", err, dashboardLog.String())
	}
	fx.Cleanup(func() { dashboardSrv.Stop() })
	cfg, err := dashboardSrv.Config()
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	caPool = x509.NewCertPool()
	caPool.AppendCertsFromPEM(cfg.CAData)
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	fx.Cleanup(func() {
		if fx.Failed() {
			fmt.Fprintf(os.Stderr, "--- dashboard server log (warnings) ---\n%s", dashboardLog.String())
		}
	})
	return nil
})

// dashboardScenario is shared by the tests: namespace shop with a chain root-ca ← web ← app ← client,
// a Credential whose Secret is taken (Failed) and one waiting on it (blocker: taken), one
// waiting on a missing Certificate, and a deletion held by a foreign finalizer.
const dashboardScenario = `apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: root-ca, namespace: shop}
spec: {isCA: true, commonName: root-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: web, namespace: shop}
spec: {dnsNames: [web.example.com], issuer: root-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: app, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Certificate, name: web}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: client, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: app}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: taken, namespace: shop}
spec: {type: password, length: 16}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: consumer, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: taken}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: orphan, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Certificate, name: nope}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: held, namespace: shop, finalizers: [example.com/hold]}
spec: {type: password, length: 16}
`

var (
	setupOnce sync.Once
	setupErr  error
	// adminToken is a cluster-admin service account's token; viewerToken one with view on
	// shop only.
	adminToken, viewerToken string
)

func gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kubeos.dev", Version: "v1alpha1", Resource: resource}
}

// setup creates the scenario once and waits for its phases.
func setup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupErr = doSetup() })
	if setupErr != nil {
		t.Fatalf("setup: %v", setupErr)
	}
}

func doSetup() error {
	ctx := context.Background()
	for _, ns := range []string{"shop", "elsewhere"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Secrets("shop").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		StringData: map[string]string{"password": "not-managed"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := applyYAML(ctx, dashboardScenario); err != nil {
		return err
	}
	if err := applyYAML(ctx, "apiVersion: kubeos.dev/v1alpha1\nkind: Credential\nmetadata: {name: secret-one, namespace: elsewhere}\nspec: {type: password}\n"); err != nil {
		return err
	}
	var err error
	if adminToken, err = saToken(ctx, "kube-system", "dash-admin", "cluster-admin", false); err != nil {
		return err
	}
	if viewerToken, err = saToken(ctx, "shop", "viewer", "view", true); err != nil {
		return err
	}
	want := map[string]string{"certificates/root-ca": "Active", "certificates/web": "Active", "credentials/app": "Active",
		"credentials/client": "Active", "credentials/taken": "Failed", "credentials/consumer": "Pending",
		"credentials/orphan": "Pending", "credentials/held": "Active"}
	for key, phase := range want {
		res, name, _ := strings.Cut(key, "/")
		if err := waitPhase(ctx, res, "shop", name, phase); err != nil {
			return err
		}
	}
	return nil
}

func applyYAML(ctx context.Context, docs string) error {
	for _, doc := range strings.Split(docs, "\n---\n") {
		var o unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return err
		}
		res := strings.ToLower(o.GetKind()) + "s"
		if _, err := dyn.Resource(gvr(res)).Namespace(o.GetNamespace()).Create(ctx, &o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s/%s: %w", res, o.GetName(), err)
		}
	}
	return nil
}

func phaseOf(ctx context.Context, res, ns, name string) (string, error) {
	o, err := dyn.Resource(gvr(res)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	p, _, _ := unstructured.NestedString(o.Object, "status", "phase")
	return p, nil
}

func waitPhase(ctx context.Context, res, ns, name, phase string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := phaseOf(ctx, res, ns, name)
		if err == nil && p == phase {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s/%s: phase %q (err %v), want %q", res, ns, name, p, err, phase)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// saToken creates a service account bound to clusterRole (in its namespace only when
// namespaced) and returns a token for it.
func saToken(ctx context.Context, ns, name, clusterRole string, namespaced bool) (string, error) {
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	subj := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}
	ref := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole}
	var err error
	if namespaced {
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj, RoleRef: ref}, metav1.CreateOptions{})
	} else {
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Subjects: subj, RoleRef: ref}, metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// browser is a plain HTTP client of the dashboard: trusts the server's CA, keeps cookies,
// follows no redirect.
type browser struct {
	c *http.Client
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &browser{c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request; origin "" sends no Origin header.
func (b *browser) do(t *testing.T, method, path string, form url.Values, origin string) (*http.Response, string) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, dashboardSrv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return res, sb.String()
}

func (b *browser) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	return b.do(t, http.MethodGet, path, nil, "")
}

// login logs in with token and fails the test unless the dashboard accepts it.
func (b *browser) login(t *testing.T, token string) {
	t.Helper()
	res, body := b.do(t, http.MethodPost, dashboard.Prefix+"login", url.Values{"token": {token}, "next": {dashboard.Prefix}}, dashboardSrv.URL)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d\n%s", res.StatusCode, body)
	}
}

// csrfOf finds the CSRF token in a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
