package workload

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestFlowControlConfiguration: flowcontrol.apiserver.k8s.io/v1 is served with upstream's
// validation and status, and the server keeps upstream's mandatory and suggested
// bootstrap objects (a suggested one's spec is restored).
func TestFlowControlConfiguration(t *testing.T) {
	// The ensurer runs once a minute, as upstream's: the restore below may take that long.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fc := clientset(t).FlowcontrolV1()
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		for _, name := range []string{"exempt", "catch-all", "system", "leader-election", "workload-high", "global-default"} {
			if _, err := fc.PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		for _, name := range []string{"exempt", "catch-all", "probes", "system-leader-election", "service-accounts", "global-default", "kube-controllers"} {
			if _, err := fc.FlowSchemas().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})

	// A user's FlowSchema: validated by upstream's rules, status writable through /status.
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
			MatchingPrecedence: 5000, DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}}},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}}},
				NonResourceRules: nil,
			}}}}
	created, err := fc.FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.FlowSchemas().Delete(ctx, "team-a", metav1.DeleteOptions{}) })
	patched, err := fc.FlowSchemas().Patch(ctx, "team-a", types.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Dangling","status":"False","reason":"Found"}]}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if len(patched.Status.Conditions) != 1 || patched.Spec.MatchingPrecedence != created.Spec.MatchingPrecedence {
		t.Fatalf("status patch: %+v", patched.Status)
	}
	bad := fs.DeepCopy()
	bad.Name, bad.Spec.MatchingPrecedence = "bad", 20000
	if _, err := fc.FlowSchemas().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.matchingPrecedence") {
		t.Fatalf("matchingPrecedence 20000: %v", err)
	}

	// The mandatory catch-all's spec cannot change (upstream's validation); a suggested
	// priority level's spec is restored unless a user took it over.
	plc, err := fc.PriorityLevelConfigurations().Get(ctx, "workload-high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := *plc.Spec.Limited.NominalConcurrencyShares
	*plc.Spec.Limited.NominalConcurrencyShares = want + 7
	if _, err := fc.PriorityLevelConfigurations().Update(ctx, plc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 90*time.Second, time.Second, func() error {
		got, err := fc.PriorityLevelConfigurations().Get(ctx, "workload-high", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := *got.Spec.Limited.NominalConcurrencyShares; s != want {
			return fmt.Errorf("workload-high nominalConcurrencyShares %d, want %d", s, want)
		}
		return nil
	})

	// Kube's in-process controllers are classified into workload-high by Kube's own
	// suggested FlowSchema, not into global-default.
	kc, err := fc.FlowSchemas().Get(ctx, "kube-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kc.Spec.PriorityLevelConfiguration.Name != "workload-high" {
		t.Fatalf("kube-controllers → %s", kc.Spec.PriorityLevelConfiguration.Name)
	}
	cfg := adminConfig(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		req, _ := http.NewRequestWithContext(ctx, "GET", cfg.Host+"/api/v1/namespaces/default/configmaps", nil)
		req.Header.Set("Impersonate-User", "system:kube-controller:test")
		req.Header.Set("Impersonate-Group", "system:kube-controllers")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if got := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID); got != string(kc.UID) || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("a controller's list classified as %s (%d)", flowSchemaName(ctx, fc, got), resp.StatusCode)
		}
		return nil
	})

	k := newKubectl(t, "1.33")
	out := k.ok("", "get", "flowschemas")
	if !strings.Contains(out, "PRIORITYLEVEL") || !strings.Contains(out, "team-a") {
		t.Fatalf("kubectl get flowschemas:\n%s", out)
	}
}

// TestPriorityAndFairness: requests are classified by the FlowSchemas (the response names
// the FlowSchema and priority level by UID, as kube-apiserver's); a priority level with no
// seats and Reject answers 429 with Retry-After, while the admin (exempt) is served.
func TestPriorityAndFairness(t *testing.T) {
	ctx := ctxT(t)
	cs := clientset(t)
	fc := cs.FlowcontrolV1()
	var exempt *flowcontrolv1.FlowSchema
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() (err error) {
		exempt, err = fc.FlowSchemas().Get(ctx, "exempt", metav1.GetOptions{})
		return err
	})
	res := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces").Do(ctx)
	var code int
	res.StatusCode(&code)
	if code != 200 {
		t.Fatalf("admin list: %d %v", code, res.Error())
	}

	plc := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kube-test-no-seats"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptrTo[int32](0), LendablePercent: ptrTo[int32](0),
				BorrowingLimitPercent: ptrTo[int32](0), LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, plc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.PriorityLevelConfigurations().Delete(ctx, plc.Name, metav1.DeleteOptions{}) })
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "kube-test-flood"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: plc.Name},
			MatchingPrecedence: 100,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "flood"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
			}}}}
	created, err := fc.FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.FlowSchemas().Delete(ctx, fs.Name, metav1.DeleteOptions{}) })

	// flood may do anything (so that its requests reach admission), and a mutating webhook
	// holds flood's configmap create until released: the level's one seat stays taken.
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kube-test-flood"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "flood"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, "kube-test-flood", metav1.DeleteOptions{}) })
	release, held := make(chan struct{}), make(chan struct{}, 16)
	var releaseOnce sync.Once
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		if review.Request != nil && review.Request.UserInfo.Username == "flood" {
			held <- struct{}{}
			<-release
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer hook.Close()
	defer releaseOnce.Do(func() { close(release) })
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})
	makeNS(t, cs, "apf-flood")
	url := hook.URL
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-test-apf-hold"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "hold.kube.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "apf-flood"}},
			SideEffects:       ptrTo(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptrTo[int32](30)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "kube-test-apf-hold", metav1.DeleteOptions{})
	})

	cfg := adminConfig(t)
	cfg.Impersonate.UserName = "flood"
	flood, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	// Wait until flood's requests are classified into the new level (the controller reads
	// the configuration through informers).
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		req, _ := http.NewRequestWithContext(ctx, "GET", cfg.Host+"/api/v1/namespaces", nil)
		req.Header.Set("Impersonate-User", "flood")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if got := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID); got != string(created.UID) {
			return fmt.Errorf("flood's list classified as %s (%d)", flowSchemaName(ctx, fc, got), resp.StatusCode)
		}
		return nil
	})
	createDone := make(chan error, 1)
	go func() {
		_, err := flood.CoreV1().ConfigMaps("apf-flood").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held"}}, metav1.CreateOptions{})
		createDone <- err
	}()
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if len(held) == 0 {
			return fmt.Errorf("flood's create not at the webhook yet")
		}
		return nil
	})
	req, _ := http.NewRequestWithContext(ctx, "GET", cfg.Host+"/api/v1/namespaces", nil)
	req.Header.Set("Impersonate-User", "flood")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(created.UID) {
		t.Fatalf("flood while its seat is taken: %d, Retry-After %q, FlowSchema %q (want 429 from %s)", resp.StatusCode, resp.Header.Get("Retry-After"),
			resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), created.UID)
	}
	// The admin (exempt) is served meanwhile; once the seat is free flood is served again.
	req, _ = http.NewRequestWithContext(ctx, "GET", cfg.Host+"/api/v1/namespaces", nil)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(exempt.UID) {
		t.Fatalf("admin: %d, FlowSchema %q (want exempt %s)", resp.StatusCode, resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), exempt.UID)
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-createDone; err != nil {
		t.Fatalf("flood's held create: %v", err)
	}
	if _, err := flood.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("flood after the seat is free: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

func flowSchemaName(ctx context.Context, fc flowcontrolclient.FlowcontrolV1Interface, uid string) string {
	l, err := fc.FlowSchemas().List(ctx, metav1.ListOptions{})
	if err != nil {
		return uid
	}
	for _, f := range l.Items {
		if string(f.UID) == uid {
			return f.Name
		}
	}
	return uid
}
