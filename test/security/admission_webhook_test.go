package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server/servertest"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webhookServer is a real TLS admission webhook: /mutate adds the label admitted-by=kube-test,
// /validate refuses objects named "forbidden-name", /slow answers only when the caller gives
// up. It records the client certificate CNs it saw.
type webhookServer struct {
	*httptest.Server
	mu      sync.Mutex
	clients []string
	calls   int
	// queries are the query strings of the requests, in order.
	queries []string
	// names are the names of the objects reviewed, in order.
	names []string
}

func startWebhook(t *testing.T, requireClientCert bool) *webhookServer {
	t.Helper()
	ws := &webhookServer{}
	ws.Server = httptest.NewUnstartedServer(http.HandlerFunc(ws.serve))
	tc, err := webhookCA.serverTLS()
	if err != nil {
		t.Fatal(err)
	}
	if requireClientCert {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	ws.TLS = tc
	ws.StartTLS()
	t.Cleanup(ws.Close)
	return ws
}

func (ws *webhookServer) serve(w http.ResponseWriter, r *http.Request) {
	ws.mu.Lock()
	ws.calls++
	ws.queries = append(ws.queries, r.URL.RawQuery)
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		ws.clients = append(ws.clients, r.TLS.PeerCertificates[0].Subject.CommonName)
	}
	ws.mu.Unlock()
	var review admissionv1.AdmissionReview
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	ws.mu.Lock()
	ws.names = append(ws.names, review.Request.Name)
	ws.mu.Unlock()
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	switch r.URL.Path {
	case "/mutate":
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		var patch string
		if obj.Labels == nil {
			patch = `[{"op":"add","path":"/metadata/labels","value":{"admitted-by":"kube-test"}}]`
		} else {
			patch = `[{"op":"add","path":"/metadata/labels/admitted-by","value":"kube-test"}]`
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = []byte(patch), &pt
		resp.AuditAnnotations = map[string]string{"mutated": "true"}
	case "/add-init-container":
		// an init container without imagePullPolicy or terminationMessagePolicy: the server
		// defaults them after the patch, as upstream
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch = []byte(`[{"op":"add","path":"/spec/initContainers","value":[{"name":"added","image":"busybox"}]}]`)
		resp.PatchType = &pt
	case "/validate":
		if review.Request.Name == "forbidden-name" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "the name forbidden-name is not allowed"}
		}
		resp.Warnings = []string{"checked by the test webhook"}
	case "/slow":
		<-r.Context().Done()
		return
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// reviewed reports whether an object named name was sent to the webhook.
func (ws *webhookServer) reviewed(name string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return slices.Contains(ws.names, name)
}

func (ws *webhookServer) clientCNs() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]string(nil), ws.clients...)
}

// testNamespace creates a namespace labelled webhook-test=<name>; webhooks select it.
func testNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"webhook-test": name}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// configMapRules select creates and updates of configmaps in namespaces labelled for ns.
func hookRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
	}}
}

func nsSelector(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": ns}}
}

// validatingHook is one validating webhook calling url.
func validatingHook(name, url string, caBundle []byte, ns string, fp admissionregistrationv1.FailurePolicyType, timeout int32) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
		Rules: hookRules(), NamespaceSelector: nsSelector(ns), FailurePolicy: &fp,
		SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds: &timeout,
	}
}

func createValidating(t *testing.T, name string, hooks ...admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	ctx := context.Background()
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// admissionEventually retries f until it returns nil or the deadline passes (webhook configurations
// reach admission through an informer, within moments of their write).
func admissionEventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// createCM creates a configmap and returns the error.
func createCM(ns, name string) (*corev1.ConfigMap, error) {
	return cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
}

// refusedWith waits until creating configmaps in ns fails with a message containing want.
// refusedWith waits until creating the configmap name (probe-N when empty) in ns fails
// with a message containing want.
func refusedWith(t *testing.T, ns, name, want string) error {
	t.Helper()
	var last error
	i := 0
	admissionEventually(t, "refusal "+want, func() error {
		i++
		n := name
		if n == "" {
			n = fmt.Sprintf("probe-%d", i)
		}
		_, err := createCM(ns, n)
		if err == nil {
			_ = cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), n, metav1.DeleteOptions{})
			return fmt.Errorf("accepted")
		}
		last = err
		if !strings.Contains(err.Error(), want) {
			return err
		}
		return nil
	})
	return last
}

func admissionKubectl(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", admissionSrv.Kubeconfig}, args...)...)
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestWebhooksWithKubectl is the "Done when": a mutating webhook adds a label, a
// validating one refuses a name, for requests made with kubectl 1.33; Kube presents its
// client certificate (the validating webhook requires one).
func TestWebhooksWithKubectl(t *testing.T) {
	admissionSuite.Need(t)
	bin, err := admissionFindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	ns := "wh-kubectl"
	testNamespace(t, ns)
	mut := startWebhook(t, false)
	val := startWebhook(t, true)
	ctx := context.Background()
	_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label-adder"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "label.kube.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr(mut.URL + "/mutate"), CABundle: webhookCA.certPEM},
			Rules: hookRules(), NamespaceSelector: nsSelector(ns), FailurePolicy: ptr(admissionregistrationv1.Fail),
			SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: ptr(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "label-adder", metav1.DeleteOptions{})
	})
	createValidating(t, "name-guard", validatingHook("deny.kube.test", val.URL+"/validate", webhookCA.certPEM, ns, admissionregistrationv1.Fail, 10))
	refusedWith(t, ns, "forbidden-name", `admission webhook "deny.kube.test" denied the request`) // both configurations are live

	out, err := admissionKubectl(t, bin, "-n", ns, "create", "configmap", "allowed", "--from-literal=k=v")
	if err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	if !strings.Contains(out, "checked by the test webhook") {
		t.Errorf("kubectl did not show the webhook's warning:\n%s", out)
	}
	out, err = admissionKubectl(t, bin, "-n", ns, "get", "configmap", "allowed", "-o", "jsonpath={.metadata.labels.admitted-by}")
	if err != nil || out != "kube-test" {
		t.Fatalf("label from the mutating webhook: %q, %v", out, err)
	}
	out, err = admissionKubectl(t, bin, "-n", ns, "create", "configmap", "forbidden-name", "--from-literal=k=v")
	if err == nil {
		t.Fatalf("kubectl create forbidden-name succeeded:\n%s", out)
	}
	want := `admission webhook "deny.kube.test" denied the request: the name forbidden-name is not allowed`
	if !strings.Contains(out, want) {
		t.Fatalf("kubectl output %q, want %q", out, want)
	}
	// Updates pass the webhooks too: the label comes back after kubectl removes it.
	out, err = admissionKubectl(t, bin, "-n", ns, "label", "configmap", "allowed", "admitted-by-")
	if err != nil {
		t.Fatalf("kubectl label: %v\n%s", err, out)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "allowed", metav1.GetOptions{})
	if err != nil || cm.Labels["admitted-by"] != "kube-test" {
		t.Fatalf("after update: %v, %v", cm.GetLabels(), err)
	}
	// Namespaces not selected are not touched.
	testNamespace(t, "wh-other")
	cm, err = createCM("wh-other", "forbidden-name")
	if err != nil || cm.Labels["admitted-by"] != "" {
		t.Fatalf("unselected namespace: %v, %v", cm.GetLabels(), err)
	}
	// Kube presented its client certificate to the webhook that requires one.
	cns := val.clientCNs()
	if len(cns) == 0 || cns[0] != admissionClientCN {
		t.Fatalf("client certificates seen by the webhook: %v", cns)
	}
	// dryRun: webhooks with sideEffects None are called, nothing is stored.
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "forbidden-name"}}, metav1.CreateOptions{DryRun: []string{"All"}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("dry-run create of forbidden-name: %v", err)
	}
	checkWebhookAudit(t)
}

// deadURL is an https URL where nothing listens.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "https://" + addr + "/validate"
}

// TestFailurePolicy: a webhook that is down refuses requests with Fail (naming the webhook)
// and lets them pass with Ignore, which the audit log records.
func TestFailurePolicy(t *testing.T) {
	admissionSuite.Need(t)
	testNamespace(t, "wh-fail")
	createValidating(t, "down-fail", validatingHook("down-fail.kube.test", deadURL(t), webhookCA.certPEM, "wh-fail", admissionregistrationv1.Fail, 5))
	err := refusedWith(t, "wh-fail", "", `failed calling webhook "down-fail.kube.test"`)
	if !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), "Internal error occurred: failed calling webhook") {
		t.Fatalf("down webhook with Fail: %v", err)
	}

	testNamespace(t, "wh-ignore")
	createValidating(t, "down-ignore", validatingHook("down-ignore.kube.test", deadURL(t), webhookCA.certPEM, "wh-ignore", admissionregistrationv1.Ignore, 5))
	// The Ignore webhook cannot be told from no webhook by the response; the audit event
	// shows it was called and failed open.
	admissionEventually(t, "failed-open annotation", func() error {
		cm, err := createCM("wh-ignore", fmt.Sprintf("ignored-%d", time.Now().UnixNano()))
		if err != nil {
			return fmt.Errorf("create with Ignore: %v", err)
		}
		for _, ev := range auditEvents(t) {
			if ev.ObjectRef == nil || ev.ObjectRef.Name != cm.Name || ev.Stage != "ResponseComplete" {
				continue
			}
			// round_0_index_<i>: i is the webhook's place among all validating webhooks.
			for k, v := range ev.Annotations {
				if strings.HasPrefix(k, "failed-open.validating.webhook.admission.k8s.io/round_0_index_") && v == "down-ignore.kube.test" {
					return nil
				}
			}
		}
		return fmt.Errorf("no failed-open annotation for %s", cm.Name)
	})
}

// TestTimeout: a webhook that does not answer is given up after timeoutSeconds.
func TestTimeout(t *testing.T) {
	admissionSuite.Need(t)
	slow := startWebhook(t, false)
	testNamespace(t, "wh-slow")
	createValidating(t, "slow", validatingHook("slow.kube.test", slow.URL+"/slow", webhookCA.certPEM, "wh-slow", admissionregistrationv1.Fail, 1))
	refusedWith(t, "wh-slow", "", `failed calling webhook "slow.kube.test"`)
	start := time.Now()
	_, err := createCM("wh-slow", "timed")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("slow webhook: %v", err)
	}
	// The webhook never answers: without timeoutSeconds the call would last until the
	// request's own 60 s deadline. The bound is that, not a speed: at load 22 the 1 s
	// timeout's answer took 8.4 s (12-07).
	if took < 900*time.Millisecond || took > 30*time.Second {
		t.Fatalf("timeoutSeconds 1 took %v", took)
	}
}

// TestCABundleMismatch: a webhook whose certificate does not verify with caBundle is not
// trusted, so the request is refused.
func TestCABundleMismatch(t *testing.T) {
	admissionSuite.Need(t)
	ws := startWebhook(t, false)
	testNamespace(t, "wh-ca")
	createValidating(t, "wrong-ca", validatingHook("wrong-ca.kube.test", ws.URL+"/validate", otherCA.certPEM, "wh-ca", admissionregistrationv1.Fail, 5))
	err := refusedWith(t, "wh-ca", "", `failed calling webhook "wrong-ca.kube.test"`)
	if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("caBundle mismatch: %v", err)
	}
	if ws.calls != 0 {
		t.Fatalf("the untrusted webhook got %d requests", ws.calls)
	}
}

// TestBadWebhookConfigurations: configurations Kube cannot call are refused at the request
// (a webhook Service that does not exist; TestWebhookService has one that does).
func TestBadWebhookConfigurations(t *testing.T) {
	admissionSuite.Need(t)
	testNamespace(t, "wh-bad")
	hook := validatingHook("svc.kube.test", "https://127.0.0.1:1/x", nil, "wh-bad", admissionregistrationv1.Fail, 5)
	hook.ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook"}}
	createValidating(t, "svc-ref", hook)
	refusedWith(t, "wh-bad", "", `Internal error occurred: failed calling webhook "svc.kube.test": failed to call webhook: service default/hook:443: service "hook" not found`)
	// Invalid configurations are refused by validation.
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "nodots"}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid configuration: %v", err)
	}
}

var admissionFindKubectl = servertest.FindKubectl
