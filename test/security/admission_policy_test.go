package security

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestValidatingAdmissionPolicy: a CEL policy bound with Deny refuses, with Warn warns, with
// Audit annotates the audit event.
func TestValidatingAdmissionPolicy(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "vap")
	testNamespace(t, "vap-warn")
	ar := cs.AdmissionregistrationV1()
	_, err := ar.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-big-data"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{
				{Expression: "!has(object.data) || size(object.data) <= 2", MessageExpression: "'configmap ' + object.metadata.name + ' has ' + string(size(object.data)) + ' keys'"},
				{Expression: "!object.metadata.name.startsWith('bad-')", Message: "names must not start with bad-", Reason: ptr(metav1.StatusReasonForbidden)},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), "no-big-data", metav1.DeleteOptions{})
	})
	for name, b := range map[string]struct {
		ns      string
		actions []admissionregistrationv1.ValidationAction
	}{
		"no-big-data-deny": {"vap", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Audit}},
		"no-big-data-warn": {"vap-warn", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}},
	} {
		_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: "no-big-data", ValidationActions: b.actions,
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector(b.ns)},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	big := func(ns, name string) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "1", "b": "2", "c": "3"}}, metav1.CreateOptions{})
		return err
	}
	var err2 error
	admissionEventually(t, "policy in force", func() error {
		err2 = big("vap", "big")
		if err2 == nil {
			_ = cs.CoreV1().ConfigMaps("vap").Delete(ctx, "big", metav1.DeleteOptions{})
			return errString("accepted")
		}
		return nil
	})
	want := `configmaps "big" is forbidden: ValidatingAdmissionPolicy 'no-big-data' with binding 'no-big-data-deny' denied request: configmap big has 3 keys`
	if !apierrors.IsInvalid(err2) || err2.Error() != want {
		t.Fatalf("deny: %v\nwant 422 %s", err2, want)
	}
	if _, err := createCM("vap", "bad-name"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "names must not start with bad-") {
		t.Fatalf("reason Forbidden: %v", err)
	}
	if _, err := createCM("vap", "fine"); err != nil {
		t.Fatalf("allowed object: %v", err)
	}
	// Warn: the request passes with a Warning header.
	cfg, _ := admissionSrv.Config()
	hc, _ := restHTTPClient(cfg)
	// Each binding reaches admission through the informer on its own: retry until the Warn
	// binding is in force too, with a fresh name each time.
	n := 0
	admissionEventually(t, "warn binding in force", func() error {
		n++
		name := fmt.Sprintf("warned-%d", n)
		body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"a":"1","b":"2","c":"3"}}`
		req, _ := http.NewRequest(http.MethodPost, admissionSrv.URL+"/api/v1/namespaces/vap-warn/configmaps", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("warn: %d %v", resp.StatusCode, resp.Header.Values("Warning"))
		}
		if w := strings.Join(resp.Header.Values("Warning"), "\n"); !strings.Contains(w, "Validation failed for ValidatingAdmissionPolicy 'no-big-data' with binding 'no-big-data-warn': configmap "+name+" has 3 keys") {
			return fmt.Errorf("no warning yet: %q", w)
		}
		return nil
	})
	// Audit: the denied request's event carries the validation failure.
	admissionEventually(t, "validation_failure annotation", func() error {
		for _, ev := range eventsFor(auditEvents(t), "create", "configmaps", "vap", "big") {
			if v := ev.Annotations["validation.policy.admission.k8s.io/validation_failure"]; strings.Contains(v, `"binding":"no-big-data-deny"`) {
				return nil
			}
		}
		return errString("no annotation")
	})
	// A policy whose expression does not compile fails requests (failurePolicy Fail).
	_, err = ar.ValidatingAdmissionPolicies().Update(ctx, func() *admissionregistrationv1.ValidatingAdmissionPolicy {
		p, _ := ar.ValidatingAdmissionPolicies().Get(ctx, "no-big-data", metav1.GetOptions{})
		p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: "object.metadata.name +"}}
		return p
	}(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admissionEventually(t, "compile error refuses", func() error {
		_, err := createCM("vap", "after-bad-policy")
		if err == nil || !strings.Contains(err.Error(), "compilation error") {
			_ = cs.CoreV1().ConfigMaps("vap").Delete(ctx, "after-bad-policy", metav1.DeleteOptions{})
			return errString("not refused: " + errText(err))
		}
		return nil
	})
	// Bad bindings are refused by validation.
	_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-binding"},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "x", ValidationActions: []admissionregistrationv1.ValidationAction{"Deny", "Warn"}},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("binding with Deny and Warn: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestValidatingAdmissionPolicyVariables: spec.variables are evaluated in order, each
// seeing the ones before it, and validations refer to them as variables.<name> (the
// conformance test "should allow expressions to refer variables").
func TestValidatingAdmissionPolicyVariables(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "vap-vars")
	ar := cs.AdmissionregistrationV1()
	_, err := ar.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "vars"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "keys", Expression: "has(object.data) ? size(object.data) : 0"},
				{Name: "many", Expression: "variables.keys > 1"},
				{Name: "broken", Expression: "object.nothing.here"},
			},
			Validations: []admissionregistrationv1.Validation{
				{Expression: "!variables.many", MessageExpression: "'too many keys: ' + string(variables.keys)"},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), "vars", metav1.DeleteOptions{})
	})
	_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vars"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "vars", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector("vap-vars")},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), "vars", metav1.DeleteOptions{})
	})
	var denied error
	admissionEventually(t, "policy in force", func() error {
		_, denied = cs.CoreV1().ConfigMaps("vap-vars").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{})
		if denied == nil {
			_ = cs.CoreV1().ConfigMaps("vap-vars").Delete(ctx, "two", metav1.DeleteOptions{})
			return errString("accepted")
		}
		return nil
	})
	if !strings.Contains(errText(denied), "too many keys: 2") {
		t.Fatalf("deny: %v", denied)
	}
	// One key: the unused broken variable does not fail the policy.
	if _, err := cs.CoreV1().ConfigMaps("vap-vars").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("one key refused: %v", err)
	}
}
