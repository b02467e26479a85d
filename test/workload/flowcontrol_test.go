package workload

import (
	"fmt"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestFlowControlConfiguration: flowcontrol.apiserver.k8s.io/v1 is served with upstream's
// validation and status, and the server keeps upstream's mandatory and suggested
// bootstrap objects (a suggested one's spec is restored).
func TestFlowControlConfiguration(t *testing.T) {
	ctx := ctxT(t)
	fc := clientset(t).FlowcontrolV1()
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		for _, name := range []string{"exempt", "catch-all", "system", "leader-election", "workload-high", "global-default"} {
			if _, err := fc.PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		for _, name := range []string{"exempt", "catch-all", "probes", "system-leader-election", "service-accounts", "global-default"} {
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

	k := newKubectl(t, "1.33")
	out := k.ok("", "get", "flowschemas")
	if !strings.Contains(out, "PRIORITYLEVEL") || !strings.Contains(out, "team-a") {
		t.Fatalf("kubectl get flowschemas:\n%s", out)
	}
}
