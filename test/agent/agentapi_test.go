package agent

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/keyutil"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/serviceaccount"
)

// agentURL is the base URL of the in-process agent's API (its port from the Node's
// daemonEndpoints, as the API server and metrics-server find it).
func agentURL(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	// The server is ready before its agent has posted the node's status (this package's first
	// test read port 0 in a CI run, 12-07): wait for the port.
	var port int32
	servertest.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		node, err := cs.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if port = node.Status.DaemonEndpoints.KubeletEndpoint.Port; port == 0 {
			return fmt.Errorf("node %s has no kubelet endpoint port yet", nodeName)
		}
		return nil
	})
	return fmt.Sprintf("https://127.0.0.1:%d", port)
}

// serviceAccountToken makes ServiceAccount ns/name and returns a token of it (TokenRequest).
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grantNodes binds a ClusterRole allowing verbs on the nodes subresources to
// ServiceAccount ns/sa, both removed when the test ends.
func grantNodes(t *testing.T, cs kubernetes.Interface, ns, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	name := ns + "-" + sa
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// agentCall makes one request of the agent's API with an optional bearer token and
// returns the status code and body.
func agentCall(t *testing.T, method, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// wantStatus checks that body is a metav1.Status of code and reason whose message holds
// every one of parts.
func wantStatus(t *testing.T, what string, code int, body []byte, wantCode int, reason metav1.StatusReason, parts ...string) {
	t.Helper()
	var st metav1.Status
	if code != wantCode || json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Code != int32(wantCode) || st.Reason != reason {
		t.Errorf("%s: %d %s, want a %d Status with reason %s", what, code, body, wantCode, reason)
		return
	}
	for _, p := range parts {
		if !strings.Contains(st.Message, p) {
			t.Errorf("%s: message %q lacks %q", what, st.Message, p)
		}
	}
}

// forgedToken is a token of ServiceAccount ns/name valid for an hour from issued, signed
// with the server's service-account key (TokenRequest gives no token that expires sooner
// than ten minutes, nor one issued in the past).
func forgedToken(t *testing.T, cs kubernetes.Interface, ns, name string, issued time.Time) string {
	t.Helper()
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(srv.DataDir, "pki", "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	sa, err := cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		t.Fatalf("sa.key holds a %T", key)
	}
	tokens, err := serviceaccount.New(signer, "", nil, func() time.Time { return issued })
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := tokens.Issue(sa, []string{tokens.Issuer()}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAgentAPITokens: the agent's API authenticates ServiceAccount tokens by TokenReview
// and authorises them by SubjectAccessReview on nodes/<subresource> with the kubelet's
// mapping: a token allowed nodes/stats reads /stats/summary but is refused /metrics/resource
// (nodes/metrics) and POST (verb create) with the kubelet's 403 message; a token allowed
// nothing is refused; a garbage token, an expired one and no credentials get 401; /healthz
// needs none. Every refusal is a metav1.Status.
func TestAgentAPITokens(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	base := agentURL(t, cs)
	stats := serviceAccountToken(t, cs, ns, "stats-reader")
	nobody := serviceAccountToken(t, cs, ns, "nobody")
	grantNodes(t, cs, ns, "stats-reader", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/stats"}, Verbs: []string{"get"}}})
	user := "system:serviceaccount:" + ns + ":stats-reader"

	// RBAC takes effect at once, but a denial is cached for 30 s: ask first what is allowed.
	code, body := agentCall(t, "GET", base+"/stats/summary", stats)
	var sum statsapi.Summary
	if code != http.StatusOK || json.Unmarshal(body, &sum) != nil || sum.Node.NodeName != nodeName {
		t.Fatalf("GET /stats/summary with a token allowed nodes/stats: %d %.300s", code, body)
	}
	code, body = agentCall(t, "GET", base+"/metrics/resource", stats)
	wantStatus(t, "GET /metrics/resource without nodes/metrics", code, body, http.StatusForbidden, metav1.StatusReasonForbidden,
		fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=[metrics])", user))
	code, body = agentCall(t, "POST", base+"/stats/summary", stats)
	wantStatus(t, "POST /stats/summary", code, body, http.StatusForbidden, metav1.StatusReasonForbidden, "verb=create", "subresource(s)=[stats]")
	code, body = agentCall(t, "GET", base+"/pods", stats)
	wantStatus(t, "GET /pods", code, body, http.StatusForbidden, metav1.StatusReasonForbidden, "subresource(s)=[pods proxy]")
	code, body = agentCall(t, "GET", base+"/stats/summary", nobody)
	wantStatus(t, "a token allowed nothing", code, body, http.StatusForbidden, metav1.StatusReasonForbidden, "user=system:serviceaccount:"+ns+":nobody")

	// A token made as TokenRequest makes them is accepted; the same, expired, is not.
	if code, body := agentCall(t, "GET", base+"/stats/summary", forgedToken(t, cs, ns, "stats-reader", time.Now())); code != http.StatusOK {
		t.Errorf("GET /stats/summary with a token signed here: %d %.300s", code, body)
	}
	expired := forgedToken(t, cs, ns, "stats-reader", time.Now().Add(-2*time.Hour))
	for what, token := range map[string]string{"a garbage token": "not-a-token", "no credentials": "", "an expired token": expired} {
		code, body := agentCall(t, "GET", base+"/stats/summary", token)
		wantStatus(t, what, code, body, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
	}
	if code, body := agentCall(t, "GET", base+"/healthz", ""); code != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET /healthz without credentials: %d %s", code, body)
	}
	if code, body := agentCall(t, "GET", base+"/healthz/services", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /healthz/services without credentials: %d %s", code, body)
	}
}
