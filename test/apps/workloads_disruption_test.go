package apps

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// TestDrainRespectsPDB: the disruption controller writes a PodDisruptionBudget's status
// (expectedPods from the ReplicaSet's scale); kubectl drain of the node holding all three
// pods evicts them one at a time — the evictions the budget refuses are answered 429 and
// retried — while the ReplicaSet re-creates each on another node, and ends with every pod
// moved and the budget whole again. (A refused eviction carries no Retry-After, as
// kube-apiserver's, so kubectl retries on its own 5 s schedule.)
func TestDrainRespectsPDB(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "drain")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 4*time.Minute)
	const label = "apps.test/drain"
	patchNode := func(name, patch string) {
		t.Helper()
		if _, err := cs.CoreV1().Nodes().Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchNode("sim-4", `{"metadata":{"labels":{"`+label+`":"yes"}}}`)
	t.Cleanup(func() {
		patchNode("sim-4", `{"metadata":{"labels":{"`+label+`":null}},"spec":{"unschedulable":null}}`)
		patchNode("sim-2", `{"metadata":{"labels":{"`+label+`":null}}}`)
	})

	l := map[string]string{"app": "guarded"}
	tmpl := podTemplate(l)
	tmpl.Spec.NodeSelector = map[string]string{label: "yes"}
	// Replacements take a while to become Ready, so the budget has no room for the
	// drain's concurrent evictions until they are.
	tmpl.Annotations = map[string]string{StartDelayAnnotation: "2s"}
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: l}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ownedReady(t, cs, ns, "app=guarded", rs.UID, 3) {
		if p.Spec.NodeName != "sim-4" {
			t.Fatalf("pod %s on %s, want sim-4", p.Name, p.Spec.NodeName)
		}
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: l}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdbWhole := func() {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guarded", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := pdb.Status
			if s.ObservedGeneration != pdb.Generation || s.ExpectedPods != 3 || s.CurrentHealthy != 3 || s.DesiredHealthy != 2 || s.DisruptionsAllowed != 1 {
				return fmt.Errorf("status %+v", s)
			}
			c := metaCondition(s.Conditions, policyv1.DisruptionAllowedCondition)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != policyv1.SufficientPodsReason {
				return fmt.Errorf("DisruptionAllowed = %+v, want True SufficientPods", c)
			}
			return nil
		})
	}
	pdbWhole()

	// One eviction uses the budget up; the next is refused with 429 (asked without
	// client-go's retries of 429s, which would otherwise wait it out).
	pods := podsOf(t, cs, ns, "app=guarded")
	if err := cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pods[0].Name}}); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	body, _ := json.Marshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"}, ObjectMeta: metav1.ObjectMeta{Name: pods[1].Name, Namespace: ns}})
	err = cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pods[1].Name).SubResource("eviction").MaxRetries(0).Body(body).Do(ctx).Error()
	if !apierrors.IsTooManyRequests(err) || !apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause) {
		t.Fatalf("second eviction: %v, want 429 with a DisruptionBudget cause", err)
	}
	ownedReady(t, cs, ns, "app=guarded", rs.UID, 3)
	pdbWhole()

	// Drain: count the Ready pods all along; the budget keeps at least two.
	minReady := make(chan int, 1)
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		ready, least := map[string]bool{}, 3
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			ready[p.Name] = ev.Type != watch.Deleted && p.DeletionTimestamp == nil && podReady(p)
			n := 0
			for _, r := range ready {
				if r {
					n++
				}
			}
			if len(ready) >= 3 {
				least = min(least, n)
			}
		}
		minReady <- least
	}()
	patchNode("sim-2", `{"metadata":{"labels":{"`+label+`":"yes"}}}`)
	k := newKubectl(t, "1.33")
	out := k.ok("", "drain", "sim-4", "--pod-selector=app=guarded", "--ignore-daemonsets", "--timeout=180s")
	contains(t, "kubectl drain", out, "node/sim-4 cordoned", "node/sim-4 drained")
	for _, p := range ownedReady(t, cs, ns, "app=guarded", rs.UID, 3) {
		if p.Spec.NodeName != "sim-2" {
			t.Errorf("pod %s on %s after the drain, want sim-2", p.Name, p.Spec.NodeName)
		}
	}
	pdbWhole()
	w.Stop()
	if least := <-minReady; least < 2 {
		t.Errorf("during the drain only %d pods were Ready, the budget wants 2", least)
	}
}

func metaCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
