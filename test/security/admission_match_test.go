package security

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mutatingHook is one mutating webhook calling url for configmaps in namespace ns.
func mutatingHook(name, url string, ns string) admissionregistrationv1.MutatingWebhook {
	fp := admissionregistrationv1.Fail
	return admissionregistrationv1.MutatingWebhook{
		Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: webhookCA.certPEM},
		Rules: hookRules(), NamespaceSelector: nsSelector(ns), FailurePolicy: &fp,
		SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
	}
}

func createMutatingHooks(t *testing.T, name string, hooks ...admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestWebhookMatchConditions: a webhook's matchConditions (CEL) decide whether it is
// called — the e2e suite's "should mutate everything except 'skip-me' configmaps" — and a
// condition that fails to evaluate refuses the request under failurePolicy Fail (403). The
// call carries ?timeout=<timeoutSeconds>s, as upstream's (the suite's "should honor
// timeout" looks for it in the error).
func TestWebhookMatchConditions(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	const ns = "wh-match"
	testNamespace(t, ns)
	ws := startWebhook(t, false)
	h := mutatingHook("match.kube.test", ws.URL+"/mutate", ns)
	h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "skip-me", Expression: "object.metadata.name != 'skip-me'"}}
	h.TimeoutSeconds = ptr(int32(7))
	createMutatingHooks(t, "match", h)
	admissionEventually(t, "the webhook labels a configmap", func() error {
		cm, err := createCM(ns, "probe")
		if err != nil {
			return err
		}
		_ = cs.CoreV1().ConfigMaps(ns).Delete(ctx, "probe", metav1.DeleteOptions{})
		if cm.Labels["admitted-by"] != "kube-test" {
			return fmt.Errorf("not mutated yet: %v", cm.Labels)
		}
		return nil
	})
	// Only skip-me must not reach the webhook: other configmaps of the namespace (the
	// root CA publisher's kube-root-ca.crt) may be reviewed meanwhile.
	skipped, err := createCM(ns, "skip-me")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().ConfigMaps(ns).Delete(ctx, "skip-me", metav1.DeleteOptions{}) })
	if _, ok := skipped.Labels["admitted-by"]; ok || ws.reviewed("skip-me") {
		t.Fatalf("skip-me was sent to the webhook (labels %v)", skipped.Labels)
	}
	ws.mu.Lock()
	q := ws.queries[len(ws.queries)-1]
	ws.mu.Unlock()
	if q != "timeout=7s" {
		t.Fatalf("webhook query %q, want timeout=7s", q)
	}

	// A condition that errors at runtime (no such field) fails closed.
	bad := mutatingHook("bad-match.kube.test", ws.URL+"/mutate", ns)
	bad.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "no-such-field", Expression: "object.data.nope == 'x'"}}
	createMutatingHooks(t, "bad-match", bad)
	err = refusedWith(t, ns, "", "no such key")
	if !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("a failing match condition: %v", err)
	}
}

// TestWebhookPatchDefaulted: what a mutating webhook adds is defaulted, as kube-apiserver
// defaults the object after each webhook's patch — the e2e suite's "should mutate pod and
// apply defaults after mutation" (an init container without imagePullPolicy or
// terminationMessagePolicy is otherwise invalid).
func TestWebhookPatchDefaulted(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	const ns = "wh-defaults"
	testNamespace(t, ns)
	ws := startWebhook(t, false)
	h := mutatingHook("init.kube.test", ws.URL+"/add-init-container", ns)
	h.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	createMutatingHooks(t, "init", h)
	var pod *corev1.Pod
	admissionEventually(t, "a pod mutated by the webhook", func() error {
		var err error
		pod, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr(false), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if len(pod.Spec.InitContainers) == 0 {
			return fmt.Errorf("not mutated yet")
		}
		return nil
	})
	ic := pod.Spec.InitContainers[0]
	if ic.ImagePullPolicy != corev1.PullAlways || ic.TerminationMessagePolicy != corev1.TerminationMessageReadFile || ic.TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Fatalf("the added init container was not defaulted: %+v", ic)
	}
}

// TestWebhooksSkipConfigurations: webhooks are not called for webhook configurations and
// admission policies (upstream's exemption), so a webhook that matches them and cannot be
// reached blocks neither new configurations nor its own removal — the e2e suite's "should
// not be able to mutate or prevent deletion of webhook configuration objects".
func TestWebhooksSkipConfigurations(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"admissionregistration.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
	}}
	dead := deadURL(t)
	m := mutatingHook("dead-mutating.kube.test", dead, "")
	m.Rules, m.NamespaceSelector = rules, nil
	createMutatingHooks(t, "dead-mutating", m)
	v := validatingHook("dead-validating.kube.test", dead, webhookCA.certPEM, "", admissionregistrationv1.Fail, 2)
	v.Rules, v.NamespaceSelector = rules, nil
	// A second webhook of the same configuration refuses configmaps named forbidden-name in
	// wh-skip: once it does, the configuration (and its dead webhook) is in effect.
	const ns = "wh-skip"
	testNamespace(t, ns)
	ws := startWebhook(t, false)
	createValidating(t, "dead-validating", v, validatingHook("marker.kube.test", ws.URL+"/validate", webhookCA.certPEM, ns, admissionregistrationv1.Fail, 5))
	refusedWith(t, ns, "forbidden-name", "the name forbidden-name is not allowed")
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("probe-%d", i)
		createValidating(t, name, validatingHook(name+".kube.test", ws.URL+"/validate", webhookCA.certPEM, "wh-none", admissionregistrationv1.Fail, 5))
		if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s: %v", name, err)
		}
	}
	if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "dead-mutating", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the dead mutating webhook's own configuration: %v", err)
	}
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dead-validating", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the dead validating webhook's own configuration: %v", err)
	}
}
