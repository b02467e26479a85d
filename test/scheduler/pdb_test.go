package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestPreemptionMinimisesPDBViolations: DefaultPreemption picks, among the nodes where
// evicting lower-priority pods makes the preemptor fit, the one with the fewest
// PodDisruptionBudget violations first (upstream's pickOneNodeForPreemption). pd-0's only
// victim is protected by a PDB (minAvailable 1, so no disruption is allowed); pd-1 needs two
// unprotected victims. Every later criterion (fewer victims) prefers pd-0, so only the PDB
// count sends the preemptor to pd-1: it is nominated there, pd-1's victims are deleted and
// the protected pod stays.
func TestPreemptionMinimisesPDBViolations(t *testing.T) {
	cs := cluster(t)
	ns := "preemption-pdb"
	createNamespace(t, cs, ns)
	const key = "test-pdb"
	extraNodes(t, cs, key, []nodeSpec{{name: "pd-0", cpu: "2", memory: "8Gi"}, {name: "pd-1", cpu: "2", memory: "8Gi"}})
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "test-pdb-high"}, Value: 1000}
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctxT(t), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	victims := []struct{ name, node, cpu string }{{"guarded", "pd-0", "1500m"}, {"free-a", "pd-1", "750m"}, {"free-b", "pd-1", "750m"}}
	t.Cleanup(func() {
		for _, v := range append(victims, struct{ name, node, cpu string }{name: "preemptor"}) {
			_ = deletePodNow(cs, ns, v.name)
		}
	})
	minAvailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctxT(t), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, v := range victims {
		create(t, cs, onlyOn(withRequests(pausePod(ns, v.name), v.cpu, "1Gi"), key, v.node))
		if got := waitScheduled(t, cs, ns, v.name); got != v.node {
			t.Fatalf("%s on %s, want %s", v.name, got, v.node)
		}
	}
	// The disruption controller has counted the guarded pod (not Ready: no agent runs it),
	// so the budget allows no disruption.
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		b, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "guarded", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if b.Status.ExpectedPods != 1 || b.Status.DisruptionsAllowed != 0 {
			return fmt.Errorf("PDB status %+v", b.Status)
		}
		return nil
	})

	pre := onlyOn(withRequests(pausePod(ns, "preemptor"), "1500m", "1Gi"), key, "")
	pre.Spec.PriorityClassName = pc.Name
	create(t, cs, pre)
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "preemptor", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.NominatedNodeName == "" && p.Spec.NodeName == "" {
			return fmt.Errorf("preemptor not nominated yet: %v", p.Status.Conditions)
		}
		if p.Status.NominatedNodeName != "pd-1" && p.Spec.NodeName != "pd-1" {
			t.Fatalf("preemptor nominated %q, bound %q; want pd-1 (no PDB violated)", p.Status.NominatedNodeName, p.Spec.NodeName)
		}
		return nil
	})
	// pd-1's victims are deleted (gracefully; the test ends it as a kubelet would).
	for _, v := range []string{"free-a", "free-b"} {
		servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
			p, err := cs.CoreV1().Pods(ns).Get(context.Background(), v, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if p.DeletionTimestamp == nil {
				return fmt.Errorf("%s not preempted yet", v)
			}
			return deletePodNow(cs, ns, v)
		})
	}
	if got := waitScheduled(t, cs, ns, "preemptor"); got != "pd-1" {
		t.Errorf("preemptor on %s, want pd-1", got)
	}
	g, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "guarded", metav1.GetOptions{})
	if err != nil || g.DeletionTimestamp != nil {
		t.Errorf("the PDB-protected pod was preempted: %v %v", err, g.GetDeletionTimestamp())
	}
}
