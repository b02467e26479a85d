package ctl

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/internal/dashboard"
	"kubeos.dev/kube/internal/server/servertest"
)

func TestNoCredentialsGoToLogin(t *testing.T) {
	dashboardSuite.Need(t)
	b := newBrowser(t)
	res, _ := b.get(t, "/ui/")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login") {
		t.Fatalf("GET /ui/ without credentials: %d Location %q, want 303 to the login page", res.StatusCode, res.Header.Get("Location"))
	}
	res, body := b.get(t, res.Header.Get("Location"))
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d\n%s", res.StatusCode, body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); csp != dashboard.ContentSecurityPolicy || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, " onclick=") || strings.Contains(body, "style=") {
		t.Errorf("the login page has inline script or style:\n%s", body)
	}
	for _, p := range []string{"/ui/stream?view=health", "/ui/kinds/credentials"} {
		req, _ := http.NewRequest(http.MethodGet, dashboardSrv.URL+p, nil)
		req.Header.Set("X-Kube-Fragment", "1")
		if p == "/ui/stream?view=health" {
			req.Header.Del("X-Kube-Fragment")
		}
		r, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", p, r.StatusCode)
		}
	}
	res, _ = b.do(t, http.MethodPost, "/ui/actions", url.Values{"action": {"delete"}}, dashboardSrv.URL)
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /ui/actions without credentials: %d, want 401", res.StatusCode)
	}
	// The API itself is unchanged: 401 for anonymous requests.
	res, _ = b.get(t, "/apis/kubeos.dev/v1alpha1/credentials")
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API without credentials: %d, want 401", res.StatusCode)
	}
}

func TestBadCredentials401WithoutDetail(t *testing.T) {
	dashboardSuite.Need(t)
	b := newBrowser(t)
	for _, tok := range []string{"not-a-token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", adminToken + "x"} {
		res, body := b.do(t, http.MethodPost, "/ui/login", url.Values{"token": {tok}}, dashboardSrv.URL)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("login with a bad token: %d, want 401\n%s", res.StatusCode, body)
		}
		for _, leak := range []string{"invalid", "unknown bearer", "signature", "expired", "token is", "credentials"} {
			if strings.Contains(strings.ToLower(body), leak) {
				t.Errorf("the 401 page leaks %q:\n%s", leak, body)
			}
		}
		if !strings.Contains(body, "Login failed.") {
			t.Errorf("the 401 page does not say the login failed:\n%s", body)
		}
		for _, c := range res.Cookies() {
			if c.Name == dashboard.SessionCookie && c.Value != "" {
				t.Errorf("a failed login set a session cookie")
			}
		}
	}
	// A forged session cookie: 401, no page.
	req, _ := http.NewRequest(http.MethodGet, dashboardSrv.URL+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookie, Value: "forged"})
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged session cookie: %d, want 401", res.StatusCode)
	}
	// A bearer token sent as to the API is not a dashboard credential: the login page.
	req, _ = http.NewRequest(http.MethodGet, dashboardSrv.URL+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err = b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("an Authorization header on /ui/: %d, want 303 to the login page", res.StatusCode)
	}
}

func TestLoginSessionCookie(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	b := newBrowser(t)
	res, body := b.do(t, http.MethodPost, "/ui/login", url.Values{"token": {adminToken}, "next": {"/ui/kinds/credentials?ns=shop"}}, dashboardSrv.URL)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/kinds/credentials?ns=shop" {
		t.Fatalf("login: %d %q\n%s", res.StatusCode, res.Header.Get("Location"), body)
	}
	var c *http.Cookie
	for _, k := range res.Cookies() {
		if k.Name == dashboard.SessionCookie {
			c = k
		}
	}
	if c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
		t.Fatalf("session cookie %+v: want Secure, HttpOnly, SameSite=Strict, Path=/", c)
	}
	if strings.Contains(c.Value, adminToken[:20]) {
		t.Errorf("the cookie carries the token")
	}
	res, body = b.get(t, "/ui/")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-kind="Credential"`) || !strings.Contains(body, "system:serviceaccount:kube-system:dash-admin") {
		t.Fatalf("health page after login: %d\n%s", res.StatusCode, body)
	}
	// An open redirect after login is refused.
	res, _ = b.do(t, http.MethodPost, "/ui/login", url.Values{"token": {adminToken}, "next": {"//evil.example/ui/"}}, dashboardSrv.URL)
	if loc := res.Header.Get("Location"); loc != "/ui/" {
		t.Errorf("login with next=//evil.example: Location %q, want /ui/", loc)
	}
	// Logging out ends the session on the server.
	c = nil
	for _, k := range res.Cookies() {
		if k.Name == dashboard.SessionCookie {
			c = k
		}
	}
	_, page := b.get(t, "/ui/")
	res, _ = b.do(t, http.MethodPost, "/ui/logout", url.Values{"csrf": {csrfOf(t, page)}}, dashboardSrv.URL)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, dashboardSrv.URL+"/ui/", nil)
	req.AddCookie(c)
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old cookie after logout: %d, want 401", res.StatusCode)
	}
}

func TestWritesNeedCSRFAndSameOrigin(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	b := newBrowser(t)
	b.login(t, adminToken)
	res, page := b.get(t, "/ui/objects/credentials/shop/app")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("object page: %d\n%s", res.StatusCode, page)
	}
	if !strings.Contains(page, `id="action-reconcile"`) || !strings.Contains(page, `id="action-delete"`) {
		t.Fatalf("the admin is not offered reconcile and delete:\n%s", page)
	}
	csrf := csrfOf(t, page)
	form := func(token string) url.Values {
		return url.Values{"csrf": {token}, "action": {"reconcile"}, "resource": {"credentials"}, "namespace": {"shop"}, "name": {"app"}}
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"no CSRF token", form(""), dashboardSrv.URL},
		{"a wrong CSRF token", form(csrf[:len(csrf)-2] + "xx"), dashboardSrv.URL},
		{"another site's Origin", form(csrf), "https://evil.example"},
		{"no Origin nor Referer", form(csrf), ""},
	} {
		res, body := b.do(t, http.MethodPost, "/ui/actions", tc.form, tc.origin)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", tc.name, res.StatusCode, body)
		}
	}
	// Another session's token does not work either.
	other := newBrowser(t)
	other.login(t, adminToken)
	if res, _ := other.do(t, http.MethodPost, "/ui/actions", form(csrf), dashboardSrv.URL); res.StatusCode != http.StatusForbidden {
		t.Errorf("another session's CSRF token: %d, want 403", res.StatusCode)
	}
	o, _ := dyn.Resource(gvr("credentials")).Namespace("shop").Get(context.Background(), "app", metav1.GetOptions{})
	if _, ok := o.GetAnnotations()[dashboard.ReconcileAnnotation]; ok {
		t.Fatalf("a refused write annotated the object")
	}
	res, body := b.do(t, http.MethodPost, "/ui/actions", form(csrf), dashboardSrv.URL)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the real reconcile: %d\n%s", res.StatusCode, body)
	}
	o, _ = dyn.Resource(gvr("credentials")).Namespace("shop").Get(context.Background(), "app", metav1.GetOptions{})
	if _, ok := o.GetAnnotations()[dashboard.ReconcileAnnotation]; !ok {
		t.Errorf("reconcile did not annotate the object: %v", o.GetAnnotations())
	}
}

func TestViewerIsRefusedActions(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	b := newBrowser(t)
	b.login(t, viewerToken)
	res, page := b.get(t, "/ui/objects/credentials/shop/app")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("viewer object page: %d\n%s", res.StatusCode, page)
	}
	if strings.Contains(page, `id="action-delete"`) || strings.Contains(page, `id="action-reconcile"`) {
		t.Errorf("the viewer is offered actions:\n%s", page)
	}
	if !strings.Contains(page, `id="denied-delete"`) || !strings.Contains(page, "may not delete credentials.kubeos.dev") {
		t.Errorf("the viewer is not told why they cannot delete:\n%s", page)
	}
	// Forcing the write anyway (a valid CSRF token, same origin): the API refuses it as them.
	res, body := b.do(t, http.MethodPost, "/ui/actions", url.Values{"csrf": {csrfOf(t, page)}, "action": {"delete"},
		"resource": {"credentials"}, "namespace": {"shop"}, "name": {"app"}}, dashboardSrv.URL)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:shop:viewer") {
		t.Errorf("the viewer's forced delete: %d, want 403 naming them\n%s", res.StatusCode, body)
	}
	if _, err := dyn.Resource(gvr("credentials")).Namespace("shop").Get(context.Background(), "app", metav1.GetOptions{}); err != nil {
		t.Errorf("app is gone: %v", err)
	}
	// Another namespace and the cluster-wide health are not theirs.
	if res, _ := b.get(t, "/ui/objects/credentials/elsewhere/secret-one"); res.StatusCode != http.StatusForbidden {
		t.Errorf("viewer in another namespace: %d, want 403", res.StatusCode)
	}
	res, page = b.get(t, "/ui/")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="refused"`) {
		t.Errorf("viewer's cluster-wide health: %d, want the refusal shown\n%s", res.StatusCode, page)
	}
	res, page = b.get(t, "/ui/?ns=shop")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-kind="Credential"`) {
		t.Errorf("viewer's health in shop: %d\n%s", res.StatusCode, page)
	}
}

func TestHTMLIsEscaped(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := context.Background()
	const evil = `<script>alert(1)</script>`
	patch := []byte(`{"metadata":{"annotations":{"note":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}}}`)
	if _, err := dyn.Resource(gvr("credentials")).Namespace("shop").Patch(ctx, "client", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := dyn.Resource(gvr("credentials")).Namespace("shop").Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A label value cannot hold markup (the API refuses it); a label key's prefix neither.
	labelPatch := []byte(`{"metadata":{"labels":{"x":"` + evil + `"}}}`)
	if _, err := dyn.Resource(gvr("credentials")).Namespace("shop").Patch(ctx, "client", types.MergePatchType, labelPatch, metav1.PatchOptions{}); err == nil {
		t.Errorf("the API accepted a <script> label")
	}
	if _, err := cs.EventsV1().Events("shop").Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "client-"},
		EventTime: metav1.NowMicro(), ReportingController: "test/" + "x", ReportingInstance: "test", Action: "Test", Reason: "Markup",
		Note: "note " + evil, Type: corev1.EventTypeWarning,
		Regarding: corev1.ObjectReference{APIVersion: "kubeos.dev/v1alpha1", Kind: "Credential", Namespace: "shop", Name: "client", UID: o.GetUID()}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A dependency name is free text until it is looked up: a missing node in the graph.
	if _, err := dyn.Resource(gvr("credentials")).Namespace("shop").Patch(ctx, "orphan", types.MergePatchType,
		[]byte(`{"spec":{"dependsOn":[{"kind":"Certificate","name":"nope"},{"kind":"Certificate","name":"`+evil+`"}]}}`), metav1.PatchOptions{}); err != nil {
		t.Logf("a dependsOn name with markup is refused by the API: %v", err)
	}
	b := newBrowser(t)
	b.login(t, adminToken)
	for _, p := range []string{"/ui/objects/credentials/shop/client", "/ui/objects/credentials/shop/orphan"} {
		res, page := b.get(t, p)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", p, res.StatusCode, page)
		}
		if strings.Contains(page, evil) {
			t.Errorf("%s carries the markup unescaped", p)
		}
		if p == "/ui/objects/credentials/shop/client" && strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;") < 2 {
			t.Errorf("%s does not show the annotation and the event note escaped:\n%s", p, page)
		}
	}
	// The same through the text filter of the kind list (the query string is echoed back).
	res, page := b.get(t, "/ui/kinds/credentials?ns=shop&q="+url.QueryEscape(evil))
	if res.StatusCode != http.StatusOK || strings.Contains(page, evil) {
		t.Errorf("kind list with a markup filter: %d, unescaped: %v", res.StatusCode, strings.Contains(page, evil))
	}
}

func TestKindListPagesFiltersAndSorts(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	b := newBrowser(t)
	b.login(t, adminToken)
	res, page := b.get(t, "/ui/kinds/credentials?ns=shop&phase=Failed")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-name="taken"`) || strings.Contains(page, `data-name="app"`) {
		t.Errorf("phase=Failed: %d\n%s", res.StatusCode, page)
	}
	res, page = b.get(t, "/ui/kinds/credentials?ns=shop&sort=-name")
	if i, j := strings.Index(page, `data-name="taken"`), strings.Index(page, `data-name="app"`); res.StatusCode != http.StatusOK || i < 0 || j < 0 || i > j {
		t.Errorf("sort=-name: %d, taken at %d, app at %d", res.StatusCode, i, j)
	}
	if res, _ := b.get(t, "/ui/kinds/credentials?sort=size"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("sort=size: %d, want 400", res.StatusCode)
	}
	if res, _ := b.get(t, "/ui/kinds/nosuchkinds"); res.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown kind: %d, want 404", res.StatusCode)
	}
	if res, _ := b.get(t, "/ui/objects/credentials/shop/nosuch"); res.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown object: %d, want 404", res.StatusCode)
	}
}

func TestObjectShowsBlockerAndWhyStuck(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := context.Background()
	b := newBrowser(t)
	b.login(t, adminToken)
	_, page := b.get(t, "/ui/objects/credentials/shop/consumer")
	if !strings.Contains(page, `id="blocker"`) || !strings.Contains(page, "Credential/shop/taken") || !strings.Contains(page, `blocker" data-id="Credential/shop/taken"`) {
		t.Errorf("consumer's page does not name taken as the blocker:\n%s", page)
	}
	_, page = b.get(t, "/ui/objects/credentials/shop/orphan")
	if !strings.Contains(page, `ph-missing`) || !strings.Contains(page, "Certificate/shop/nope") {
		t.Errorf("orphan's page does not show the missing dependency:\n%s", page)
	}
	_, page = b.get(t, "/ui/objects/certificates/shop/web")
	for _, want := range []string{`data-id="Credential/shop/app"`, `data-id="Credential/shop/client"`, `data-id="Certificate/shop/root-ca"`} {
		if !strings.Contains(page, want) {
			t.Errorf("web's graphs lack %s", want)
		}
	}
	if err := dyn.Resource(gvr("credentials")).Namespace("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, page = b.get(t, "/ui/objects/credentials/shop/held")
	if !strings.Contains(page, `id="why-stuck"`) || !strings.Contains(page, "example.com/hold") || !strings.Contains(page, "Deletion timeout") {
		t.Errorf("held's page lacks why-stuck's answer:\n%s", page)
	}
	if !strings.Contains(page, `id="phase">Deleting<`) || strings.Contains(page, `id="why"`) || strings.Contains(page, `id="action-delete"`) {
		t.Errorf("held's page: want phase Deleting, no why-not-Active, no delete button:\n%s", page)
	}
	res, page := b.get(t, "/ui/kinds/credentials?ns=shop&phase=Deleting")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-name="held"`) || strings.Contains(page, `data-name="app"`) {
		t.Errorf("phase=Deleting: %d\n%s", res.StatusCode, page)
	}
}

// TestStreamSendsChangesAndStopsOn401 reads the SSE stream as a client would.
func TestStreamSendsChangesAndStopsOn401(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := context.Background()
	tok, err := saToken(ctx, "shop", "short-lived", "view", true)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(t, tok)
	req, _ := http.NewRequest(http.MethodGet, dashboardSrv.URL+"/ui/stream?view=kind&resource=credentials&ns=shop", nil)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c := &http.Client{Jar: b.c.Jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool}}}
	res, err := c.Do(req.WithContext(sctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "event: ") || strings.HasPrefix(l, "data: ") {
				events <- l
			}
		}
		close(events)
	}()
	next := func() string {
		select {
		case l, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return l
		case <-sctx.Done():
			t.Fatal("no event within a minute")
		}
		return ""
	}
	if l := next(); l != "event: ready" {
		t.Fatalf("first line %q, want event: ready", l)
	}
	next() // ready's data
	if _, err := dyn.Resource(gvr("credentials")).Namespace("shop").Patch(ctx, "taken", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Other tests' objects in the namespace may change meanwhile (a Credential "held" still
	// being deleted): changes are read until the one of "taken".
	for {
		if l := next(); l != "event: change" {
			t.Fatalf("after a change: %q, want event: change", l)
		}
		l := next()
		if strings.Contains(l, `"name":"taken"`) {
			break
		}
		if !strings.Contains(l, `"kind":"Credential"`) || !strings.Contains(l, `"namespace":"shop"`) {
			t.Fatalf("change data %q is not of a Credential in shop", l)
		}
	}
	// The service account goes: its token stops working, and so does the session.
	if err := cs.CoreV1().ServiceAccounts("shop").Delete(ctx, "short-lived", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := c.Get(dashboardSrv.URL + "/ui/stream?view=kind&resource=credentials&ns=shop")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if code = r.StatusCode; code == http.StatusUnauthorized {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != http.StatusUnauthorized {
		t.Fatalf("the stream of a deleted service account's session: %d, want 401", code)
	}
}

// TestClientCertificate logs in with nothing but a client certificate the server trusts.
func TestClientCertificate(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := context.Background()
	if _, err := cs.RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cert-editor"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "cert-editor"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := dashboardSrv.Inner().LoopbackConfig("cert-editor")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool, Certificates: []tls.Certificate{cert}}}
	var page string
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error { // RBAC snapshot
		var res *http.Response
		res, page = b.get(t, "/ui/?ns=shop")
		if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-kind="Credential"`) {
			return fmt.Errorf("health in shop with a client certificate: %d", res.StatusCode)
		}
		return nil
	})
	if !strings.Contains(page, `class="who">cert-editor<`) {
		t.Errorf("the page does not name the certificate's user:\n%s", page)
	}
	res, page := b.get(t, "/ui/objects/credentials/shop/consumer")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="action-reconcile"`) {
		t.Fatalf("editor's object page: %d\n%s", res.StatusCode, page)
	}
	form := url.Values{"csrf": {csrfOf(t, page)}, "action": {"reconcile"}, "resource": {"credentials"}, "namespace": {"shop"}, "name": {"consumer"}}
	if res, body := b.do(t, http.MethodPost, "/ui/actions", form, dashboardSrv.URL); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("editor's reconcile: %d\n%s", res.StatusCode, body)
	}
	o, err := dyn.Resource(gvr("credentials")).Namespace("shop").Get(ctx, "consumer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.GetAnnotations()[dashboard.ReconcileAnnotation]; !ok {
		t.Errorf("the reconcile annotation is missing")
	}
	// The write is audited as the certificate's user: the dashboard has no identity.
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/ops.kubeos.dev/v1alpha1/namespaces/shop/auditevents").
			Param("uid", string(o.GetUID())).Do(ctx).Raw()
		if err != nil {
			return err
		}
		var l opsapi.AuditList
		if err := json.Unmarshal(raw, &l); err != nil {
			return err
		}
		for _, ev := range l.Items {
			if ev.Verb == "patch" && ev.User.Username == "cert-editor" {
				return nil
			}
		}
		return fmt.Errorf("no patch by cert-editor in the audit entries of consumer (%d entries)", len(l.Items))
	})
	// A certificate's CSRF token is not a session's, and the reverse.
	other := newBrowser(t)
	other.login(t, adminToken)
	if res, _ := other.do(t, http.MethodPost, "/ui/actions", form, dashboardSrv.URL); res.StatusCode != http.StatusForbidden {
		t.Errorf("the certificate's CSRF token in a token session: %d, want 403", res.StatusCode)
	}
	// A login posted from another site is refused (login CSRF).
	if res, _ := newBrowser(t).do(t, http.MethodPost, "/ui/login", url.Values{"token": {adminToken}}, "https://evil.example"); res.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site login: %d, want 403", res.StatusCode)
	}
}
