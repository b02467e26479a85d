package security

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

func mutatingPolicy(name string, resources []string, group string, mutations ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      ptr(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources},
				}}}},
			Mutations: mutations,
		},
	}
}

func applyConfig(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr}}
}

func jsonPatch(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr}}
}

// createMutating creates the policy and a binding of it to the namespace ns, removed at the
// end of the test.
func createMutating(t *testing.T, pol *admissionregistrationv1.MutatingAdmissionPolicy, ns string, ref *admissionregistrationv1.ParamRef) {
	t.Helper()
	ctx := context.Background()
	ar := cs.AdmissionregistrationV1()
	if _, err := ar.MutatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.MutatingAdmissionPolicies().Delete(context.Background(), pol.Name, metav1.DeleteOptions{})
	})
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: pol.Name + "-binding"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: pol.Name, ParamRef: ref,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector(ns)}},
	}
	if _, err := ar.MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.MutatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	})
}

// TestMutatingAdmissionPolicyApplyConfiguration: the conformance suite's two cases — an
// ApplyConfiguration adds an annotation and sets a Deployment's replicas — merged through
// the Deployment's schema, on create and on update.
func TestMutatingAdmissionPolicyApplyConfiguration(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "map-apply")
	createMutating(t, mutatingPolicy("replicas-1337", []string{"deployments"}, "apps",
		applyConfig(`Object{metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}`),
		applyConfig(`Object{spec: Object.spec{replicas: 1337}}`)), "map-apply", nil)
	dep := func(name string) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kept": "yes"}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}}}
	}
	n := 0
	var got *appsv1.Deployment
	admissionEventually(t, "policy in force", func() error {
		n++
		name := fmt.Sprintf("marker-%d", n)
		d, err := cs.AppsV1().Deployments("map-apply").Create(ctx, dep(name), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got = d
		if d.Annotations["mutated-by"] != "admission-policy" {
			return fmt.Errorf("not mutated: %v", d.Annotations)
		}
		return nil
	})
	if *got.Spec.Replicas != 1337 || got.Annotations["kept"] != "yes" {
		t.Fatalf("created: replicas %d, annotations %v; want 1337 and the request's annotation kept", *got.Spec.Replicas, got.Annotations)
	}
	got.Spec.Replicas = ptr[int32](2)
	got.Annotations = map[string]string{"other": "x"}
	up, err := cs.AppsV1().Deployments("map-apply").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *up.Spec.Replicas != 1337 || up.Annotations["mutated-by"] != "admission-policy" || up.Annotations["other"] != "x" {
		t.Fatalf("updated: replicas %d, annotations %v", *up.Spec.Replicas, up.Annotations)
	}
	// Outside the bound namespace nothing changes.
	testNamespace(t, "map-apply-other")
	d, err := cs.AppsV1().Deployments("map-apply-other").Create(ctx, dep("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 || d.Annotations["mutated-by"] != "" {
		t.Fatalf("unbound namespace mutated: %d %v", *d.Spec.Replicas, d.Annotations)
	}
}

// TestMutatingAdmissionPolicyJSONPatchParams: a JSONPatch takes its value from the
// binding's parameter object; matchConditions skip some objects; variables are visible.
func TestMutatingAdmissionPolicyJSONPatchParams(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "map-json")
	if _, err := cs.CoreV1().ConfigMaps("map-json").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "params"},
		Data: map[string]string{"owner": "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pol := mutatingPolicy("add-owner", []string{"configmaps"}, "",
		jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels", value: {"owner": string(params.data.owner), "from": variables.source}}]`))
	pol.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	pol.Spec.Variables = []admissionregistrationv1.Variable{{Name: "source", Expression: `"policy-" + object.metadata.name`}}
	pol.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-skipped", Expression: `!object.metadata.name.startsWith("skip-")`}}
	createMutating(t, pol, "map-json", &admissionregistrationv1.ParamRef{Name: "params", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)})
	n := 0
	var got *corev1.ConfigMap
	admissionEventually(t, "policy in force", func() error {
		n++
		c, err := cs.CoreV1().ConfigMaps("map-json").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", n)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got = c
		if c.Labels["owner"] == "" {
			return fmt.Errorf("not mutated: %v", c.Labels)
		}
		return nil
	})
	if got.Labels["owner"] != "team-a" || got.Labels["from"] != "policy-"+got.Name {
		t.Fatalf("labels %v", got.Labels)
	}
	skipped, err := cs.CoreV1().ConfigMaps("map-json").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "skip-me"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped.Labels) != 0 {
		t.Fatalf("matchConditions ignored: %v", skipped.Labels)
	}
}

// TestMutatingAdmissionPolicyFailures: an expression that fails at run time refuses the
// request with upstream's message under failurePolicy Fail, and is skipped under Ignore;
// a malformed policy is refused by upstream's validation; kubectl lists the policies.
func TestMutatingAdmissionPolicyFailures(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "map-fail")
	pol := mutatingPolicy("fails", []string{"configmaps"}, "",
		applyConfig(`Object{metadata: Object.metadata{labels: {"x": object.data.missing}}}`))
	createMutating(t, pol, "map-fail", nil)
	n := 0
	admissionEventually(t, "failing policy in force", func() error {
		n++
		_, err := cs.CoreV1().ConfigMaps("map-fail").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("f-%d", n)}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
		if err == nil {
			return fmt.Errorf("created")
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Fatalf("want a refusal, got %v", err)
		}
		if !strings.Contains(err.Error(), "policy 'fails' with binding 'fails-binding' denied request") {
			t.Fatalf("message: %v", err)
		}
		return nil
	})
	if _, err := cs.CoreV1().ConfigMaps("map-fail").Get(ctx, fmt.Sprintf("f-%d", n), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused object stored: %v", err)
	}
	// failurePolicy Ignore lets it through.
	cur, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "fails", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.FailurePolicy = ptr(admissionregistrationv1.Ignore)
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	admissionEventually(t, "Ignore in force", func() error {
		n++
		_, err := cs.CoreV1().ConfigMaps("map-fail").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("f-%d", n)}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
		return err
	})

	// Upstream's validation: a mutation without its expression, an unknown patch type.
	bad := mutatingPolicy("bad", []string{"configmaps"}, "", admissionregistrationv1.Mutation{PatchType: "Bogus"})
	_, err = cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.mutations[0].patchType") {
		t.Fatalf("bad policy: %v", err)
	}
	unbound := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-policy"}}
	_, err = cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, unbound, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.policyName") {
		t.Fatalf("binding without policyName: %v", err)
	}

	kubectl, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := servertest.RunKubectl(kubectl, t.TempDir(), admissionSrv.Kubeconfig, "", "get", "mutatingadmissionpolicies")
	if err != nil || !strings.Contains(out, "fails") {
		t.Fatalf("kubectl get mutatingadmissionpolicies: %v\n%s%s", err, out, stderr)
	}
}

// TestMutatingAdmissionPolicyReinvocation: policies run before the mutating webhooks; one
// with reinvocationPolicy IfNeeded runs again after a webhook changed the object (it sees
// the webhook's label), one with Never does not.
func TestMutatingAdmissionPolicyReinvocation(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	ns := "map-reinvoke"
	testNamespace(t, ns)
	mut := startWebhook(t, false)
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "map-label-adder"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "label.kube.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr(mut.URL + "/mutate"), CABundle: webhookCA.certPEM},
			Rules: hookRules(), NamespaceSelector: nsSelector(ns), FailurePolicy: ptr(admissionregistrationv1.Fail),
			SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "map-label-adder", metav1.DeleteOptions{})
	})
	saw := func(key string) string {
		return `Object{metadata: Object.metadata{annotations: {"` + key + `": (has(object.metadata.labels) && "admitted-by" in object.metadata.labels) ? "yes" : "no"}}}`
	}
	again := mutatingPolicy("saw-hook-again", []string{"configmaps"}, "", applyConfig(saw("again")))
	again.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy
	createMutating(t, again, ns, nil)
	createMutating(t, mutatingPolicy("saw-hook-once", []string{"configmaps"}, "", applyConfig(saw("once"))), ns, nil)
	n := 0
	var got *corev1.ConfigMap
	admissionEventually(t, "policies and webhook in force", func() error {
		n++
		c, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%d", n)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got = c
		if c.Labels["admitted-by"] == "" || c.Annotations["again"] == "" || c.Annotations["once"] == "" {
			return fmt.Errorf("not all in force: labels %v annotations %v", c.Labels, c.Annotations)
		}
		return nil
	})
	if got.Annotations["again"] != "yes" || got.Annotations["once"] != "no" {
		t.Fatalf("annotations %v: want again=yes (reinvoked after the webhook), once=no (ran before it)", got.Annotations)
	}
}
