package security

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"kubeos.dev/kube/internal/apiserver/proxy/agenttest"
	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server/servertest"
)

// connectHook is a real TLS webhook for connect requests. /validate refuses an exec of
// "forbidden", a port-forward to port 22 and nodes/proxy of /secret; /mutate turns an exec
// of "rewrite" into "echo rewritten" and a proxy of /rewrite-me into one of /configz; /selected refuses everything (its webhook has an
// objectSelector, which never selects a connect). Every request it sees is kept.
type connectHook struct {
	*httptest.Server
	mu      sync.Mutex
	reviews []connectReview
}

// connectReview is one AdmissionRequest as the webhook saw it.
type connectReview struct {
	path string // /validate, /mutate, /selected
	req  admissionv1.AdmissionRequest
	obj  map[string]any
}

func startConnectHook(t *testing.T) *connectHook {
	t.Helper()
	h := &connectHook{}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	tc, err := webhookCA.serverTLS()
	if err != nil {
		t.Fatal(err)
	}
	h.TLS = tc
	h.StartTLS()
	t.Cleanup(h.Close)
	return h
}

func (h *connectHook) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	var obj map[string]any
	_ = json.Unmarshal(review.Request.Object.Raw, &obj)
	h.mu.Lock()
	h.reviews = append(h.reviews, connectReview{path: r.URL.Path, req: *review.Request, obj: obj})
	h.mu.Unlock()
	command, _ := obj["command"].([]any)
	ports, _ := obj["ports"].([]any)
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	deny := func(msg string) {
		resp.Allowed, resp.Result = false, &metav1.Status{Code: http.StatusForbidden, Message: msg}
	}
	switch r.URL.Path {
	case "/validate":
		switch {
		case slices.Contains(command, any("forbidden")):
			deny("exec of forbidden is not allowed")
		case review.Request.SubResource == "portforward" && slices.Contains(ports, any(float64(22))):
			deny("port 22 may not be forwarded")
		case review.Request.SubResource == "proxy" && obj["path"] == "/secret":
			deny("no secrets")
		}
	case "/mutate":
		pt := admissionv1.PatchTypeJSONPatch
		switch {
		case len(command) > 0 && command[0] == "rewrite":
			resp.Patch, resp.PatchType = []byte(`[{"op":"replace","path":"/command","value":["echo","rewritten"]}]`), &pt
		case obj["path"] == "/rewrite-me":
			resp.Patch, resp.PatchType = []byte(`[{"op":"replace","path":"/path","value":"/configz"}]`), &pt
		}
	case "/selected":
		deny("the objectSelector webhook was called")
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// seen returns the requests seen on path whose object satisfies match.
func (h *connectHook) seen(path string, match func(connectReview) bool) []connectReview {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []connectReview
	for _, r := range h.reviews {
		if r.path == path && (match == nil || match(r)) {
			out = append(out, r)
		}
	}
	return out
}

// commandIs matches an exec whose command is cmd.
func commandIs(cmd ...string) func(connectReview) bool {
	return func(r connectReview) bool {
		got, _ := r.obj["command"].([]any)
		if r.req.SubResource != "exec" || len(got) != len(cmd) {
			return false
		}
		for i := range cmd {
			if got[i] != cmd[i] {
				return false
			}
		}
		return true
	}
}

// connectWorld is an agent stub trusted by the admission suite's server, its Node, and a
// pod web (container app) bound to it in namespace ns.
type connectWorld struct {
	ns, node  string
	agent     *agenttest.Agent
	proxyable bool // the agent's address is one nodes/proxy accepts (not loopback)
}

func newConnectWorld(t *testing.T, ns string) *connectWorld {
	t.Helper()
	ctx := context.Background()
	host, proxyable := agenttest.GlobalUnicastIPv4()
	// The agent's PKI: the server's CA and a serving certificate for host, as a node
	// agent's.
	dir := filepath.Join(t.TempDir(), "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pki.CACertName, pki.CAKeyName} {
		b, err := os.ReadFile(filepath.Join(admissionSrv.DataDir, "pki", f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := pki.Ensure(pki.Options{Dir: dir, Hosts: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	w := &connectWorld{ns: ns, node: ns + "-node", agent: agenttest.Start(t, host, p), proxyable: proxyable}
	_, portStr, _ := net.SplitHostPort(w.agent.Addr)
	port, _ := strconv.Atoi(portStr)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.node}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}, {Type: corev1.NodeHostName, Address: w.node}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), w.node, metav1.DeleteOptions{}) })
	testNamespace(t, ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{NodeName: w.node,
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	// The namespace's default ServiceAccount, which admission wants, comes from a controller.
	admissionEventually(t, "create pod web", func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	return w
}

// TestConnectAdmission: requests to connect subresources pass admission as upstream's do —
// operation CONNECT with the subresource's options as the object — so a validating
// webhook refuses `kubectl exec` (1.27 over SPDY, 1.33 over WebSocket then SPDY) with its
// message, a mutating webhook's change to the options is what runs, a
// ValidatingAdmissionPolicy refuses an exec by its command, and port-forward and
// nodes/proxy are admitted with their own options.
func TestConnectAdmission(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	const ns = "connect-adm"
	w := newConnectWorld(t, ns)
	hook := startConnectHook(t)
	rule := func(resources ...string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources},
		}}
	}
	hookTo := func(name, path string, rules []admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr(hook.URL + path), CABundle: webhookCA.certPEM},
			Rules: rules, NamespaceSelector: nsSelector(ns), FailurePolicy: ptr(admissionregistrationv1.Fail),
			SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		}
	}
	selected := hookTo("selected.kube.test", "/selected", rule("pods/*", "nodes/proxy"))
	selected.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "anything", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	createValidating(t, "connect-guard",
		hookTo("connect.kube.test", "/validate", rule("pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy", "nodes/proxy")),
		selected)
	mut := hookTo("rewrite.kube.test", "/mutate", rule("pods/exec", "nodes/proxy"))
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "connect-rewriter"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: mut.Name, ClientConfig: mut.ClientConfig, Rules: mut.Rules,
			NamespaceSelector: mut.NamespaceSelector, FailurePolicy: mut.FailurePolicy, SideEffects: mut.SideEffects, AdmissionReviewVersions: mut.AdmissionReviewVersions}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "connect-rewriter", metav1.DeleteOptions{})
	})
	createConnectPolicy(t, ns)

	cfg, err := admissionSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	execOut := func(command ...string) (string, error) {
		q := url.Values{"container": {"app"}, "stdout": {"true"}, "command": command}
		u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/" + ns + "/pods/web/exec?" + q.Encode())
		ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			return "", err
		}
		var out bytes.Buffer
		err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out})
		return out.String(), err
	}
	// Configurations reach admission through informers: wait for all three.
	admissionEventually(t, "the connect webhooks and policy in force", func() error {
		if _, err := execOut("forbidden"); err == nil || !strings.Contains(err.Error(), "exec of forbidden is not allowed") {
			return fmt.Errorf("exec forbidden: %v", err)
		}
		if out, err := execOut("rewrite"); out != "rewritten\n" {
			return fmt.Errorf("exec rewrite: %q %v", out, err)
		}
		if _, err := execOut("policy-denied"); err == nil || !strings.Contains(err.Error(), "policy-denied may not run") {
			return fmt.Errorf("exec policy-denied: %v", err)
		}
		return nil
	})

	for _, v := range []string{"1.27", "1.33"} {
		bin, err := admissionFindKubectl(v)
		if err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		run := func(args ...string) (string, string, error) {
			out, errOut, err := servertest.RunKubectl(bin, home, admissionSrv.Kubeconfig, "", append([]string{"-n", ns}, args...)...)
			t.Logf("kubectl.%s %s\n%s%s", v, strings.Join(args, " "), out, errOut)
			return out, errOut, err
		}
		if out, _, err := run("exec", "web", "--", "echo", "hi"); err != nil || out != "hi\n" {
			t.Errorf("kubectl.%s exec echo hi: %q, %v", v, out, err)
		}
		want := `admission webhook "connect.kube.test" denied the request: exec of forbidden is not allowed`
		if _, errOut, err := run("exec", "web", "--", "forbidden"); err == nil || !strings.Contains(errOut, want) {
			t.Errorf("kubectl.%s exec forbidden: %v %q, want %q", v, err, errOut, want)
		}
		if out, _, err := run("exec", "web", "--", "rewrite"); err != nil || out != "rewritten\n" {
			t.Errorf("kubectl.%s exec rewrite: %q, %v, want the mutating webhook's echo rewritten", v, out, err)
		}
		want = `ValidatingAdmissionPolicy 'connect-exec-policy' with binding 'connect-exec-policy' denied request: policy-denied may not run`
		if _, errOut, err := run("exec", "web", "--", "policy-denied"); err == nil || !strings.Contains(errOut, want) {
			t.Errorf("kubectl.%s exec policy-denied: %v %q, want %q", v, err, errOut, want)
		}
		// A namespace that does not exist, under webhooks with a namespaceSelector: 404 for the
		// namespace, as upstream's namespace matcher answers (NamespaceLifecycle lets connects
		// through).
		want = `Error from server (NotFound): namespaces "connect-nowhere" not found`
		if _, errOut, err := run("exec", "-n", "connect-nowhere", "web", "--", "echo", "hi"); err == nil || !strings.Contains(errOut, want) {
			t.Errorf("kubectl.%s exec in a namespace that does not exist: %v %q, want %q", v, err, errOut, want)
		}
	}

	// What the webhook was sent for an exec, as upstream sends it.
	got := hook.seen("/validate", commandIs("echo", "hi"))
	if len(got) == 0 {
		t.Fatal("the validating webhook saw no exec of echo hi")
	}
	r := got[len(got)-1]
	execKind := metav1.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	if r.req.Operation != admissionv1.Connect || r.req.Kind != execKind || r.req.Resource != pods || r.req.SubResource != "exec" ||
		r.req.RequestKind == nil || *r.req.RequestKind != execKind || r.req.RequestResource == nil || *r.req.RequestResource != pods || r.req.RequestSubResource != "exec" ||
		r.req.Name != "web" || r.req.Namespace != ns || r.req.UserInfo.Username != pki.AdminUser ||
		r.req.DryRun == nil || *r.req.DryRun || len(r.req.OldObject.Raw) != 0 || len(r.req.Options.Raw) != 0 {
		t.Errorf("AdmissionRequest for exec: %+v", r.req)
	}
	if r.obj["kind"] != "PodExecOptions" || r.obj["apiVersion"] != "v1" || r.obj["container"] != "app" || r.obj["stdout"] != true || r.obj["metadata"] != nil {
		t.Errorf("exec object: %s", r.req.Object.Raw)
	}
	// Validation comes after mutation: the validating webhook saw the rewritten command only.
	if n := len(hook.seen("/validate", commandIs("rewrite"))); n != 0 || len(hook.seen("/validate", commandIs("echo", "rewritten"))) == 0 {
		t.Errorf("validating webhook saw %d execs of rewrite and %d of echo rewritten", n, len(hook.seen("/validate", commandIs("echo", "rewritten"))))
	}
	// An objectSelector never selects a connect: the object has no labels to match.
	if n := len(hook.seen("/selected", nil)); n != 0 {
		t.Errorf("the webhook with an objectSelector was called %d times", n)
	}

	// A port-forward is admitted with its ports (a plain POST, refused before any upgrade).
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	post := func(path string) (int, string) {
		resp, err := hc.Post(cfg.Host+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	base := "/api/v1/namespaces/" + ns + "/pods/web/"
	if code, body := post(base + "portforward?ports=22"); code != http.StatusForbidden || !strings.Contains(body, "port 22 may not be forwarded") {
		t.Errorf("portforward to 22: %d %s", code, body)
	}
	if pf := hook.seen("/validate", func(r connectReview) bool { return r.req.SubResource == "portforward" }); len(pf) == 0 || pf[0].req.Kind.Kind != "PodPortForwardOptions" {
		t.Errorf("port-forward reviews: %+v", pf)
	}
	// dryRun is refused before admission, as upstream.
	before := len(hook.seen("/validate", commandIs("echo", "dry")))
	if code, body := post(base + "exec?command=echo&command=dry&stdout=true&dryRun=All"); code != http.StatusBadRequest || !strings.Contains(body, "dryRun is not supported") {
		t.Errorf("exec with dryRun: %d %s", code, body)
	}
	if len(hook.seen("/validate", commandIs("echo", "dry"))) != before {
		t.Error("an exec with dryRun reached the webhook")
	}

	// nodes/proxy: NodeProxyOptions carry the path after proxy/.
	get := func(path string) (int, string) {
		resp, err := hc.Get(cfg.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/api/v1/nodes/" + w.node + "/proxy/secret"); code != http.StatusForbidden || !strings.Contains(body, `admission webhook \"connect.kube.test\" denied the request: no secrets`) {
		t.Errorf("nodes/proxy/secret: %d %s", code, body)
	}
	code, body := get("/api/v1/nodes/" + w.node + "/proxy/healthz")
	if w.proxyable && (code != http.StatusOK || body != "ok") {
		t.Errorf("nodes/proxy/healthz: %d %s", code, body)
	}
	// A mutating webhook's path is the one proxied to.
	code, body = get("/api/v1/nodes/" + w.node + "/proxy/rewrite-me")
	if w.proxyable && (code != http.StatusOK || body != "agent GET /configz") {
		t.Errorf("nodes/proxy/rewrite-me: %d %s, want the agent's answer for /configz", code, body)
	}
	np := hook.seen("/validate", func(r connectReview) bool { return r.req.Resource.Resource == "nodes" && r.obj["path"] == "/healthz" })
	if len(np) == 0 || np[0].req.Kind.Kind != "NodeProxyOptions" || np[0].req.Name != w.node || np[0].req.Namespace != "" || np[0].req.SubResource != "proxy" {
		t.Errorf("nodes/proxy reviews: %+v", np)
	}
}

// createConnectPolicy binds a ValidatingAdmissionPolicy refusing execs of policy-denied in
// ns.
func createConnectPolicy(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	ar := cs.AdmissionregistrationV1()
	const name = "connect-exec-policy"
	_, err := ar.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/exec"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "request.operation == 'CONNECT' && object.kind == 'PodExecOptions' && !object.command.exists(c, c == 'policy-denied')",
				Message:    "policy-denied may not run",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector(ns)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
