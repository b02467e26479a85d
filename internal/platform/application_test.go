package platform

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func comp(name string, phase lifecycle.Phase, conds ...metav1.Condition) *v1alpha1.Component {
	c := &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}}
	c.Status.Phase, c.Status.Conditions = phase, conds
	return c
}

func TestApplicationTable(t *testing.T) {
	ready := metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue, Reason: "Provisioned"}
	crash := metav1.Condition{Type: lifecycle.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "CrashLoopBackOff", Message: "pod web-1: back-off"}
	deps := metav1.Condition{Type: lifecycle.ConditionDependenciesReady, Status: metav1.ConditionFalse, Reason: "DependenciesNotReady", Message: "waiting for Database/shop/db"}
	members := []member{
		{name: "api", comp: comp("api", lifecycle.PhaseActive, ready)},
		{name: "gone"},
		{name: "web", comp: comp("web", lifecycle.PhaseReconciling, crash)},
		{name: "worker", comp: comp("worker", lifecycle.PhasePending, deps)},
	}
	rows, sum := applicationTable(&v1alpha1.Application{}, members)
	if sum != "1/4" {
		t.Fatalf("ready = %q", sum)
	}
	want := []v1alpha1.ApplicationComponentStatus{
		{Name: "api", Phase: lifecycle.PhaseActive, Ready: true},
		{Name: "gone", Reason: "NotFound", Message: "Component gone does not exist"},
		{Name: "web", Phase: lifecycle.PhaseReconciling, Reason: "CrashLoopBackOff", Message: "pod web-1: back-off"},
		{Name: "worker", Phase: lifecycle.PhasePending, Reason: "DependenciesNotReady", Message: "waiting for Database/shop/db"},
	}
	if !equalRows(rows, want) {
		t.Fatalf("rows\n got %+v\nwant %+v", rows, want)
	}
}

func TestReverseDependencyOrder(t *testing.T) {
	dep := func(c *v1alpha1.Component, on ...string) *v1alpha1.Component {
		for _, n := range on {
			c.Spec.DependsOn = append(c.Spec.DependsOn, v1alpha1.DependencyRef{Kind: "Component", Name: n})
		}
		return c
	}
	// web → api → db-proxy; worker → api.
	comps := []*v1alpha1.Component{dep(comp("api", ""), "db-proxy"), comp("db-proxy", ""), dep(comp("web", ""), "api"), dep(comp("worker", ""), "api")}
	var got []string
	for _, c := range reverseDependencyOrder(comps) {
		got = append(got, c.Name)
	}
	pos := map[string]int{}
	for i, n := range got {
		pos[n] = i
	}
	if len(got) != 4 || pos["web"] > pos["api"] || pos["worker"] > pos["api"] || pos["api"] > pos["db-proxy"] {
		t.Fatalf("order %v: a Component must go before what it depends on", got)
	}
}

func TestValidateApplicationSpec(t *testing.T) {
	for _, c := range []struct {
		spec v1alpha1.ApplicationSpec
		bad  bool
	}{
		{v1alpha1.ApplicationSpec{Components: []string{"web", "api"}}, false},
		{v1alpha1.ApplicationSpec{Components: []string{"other/web"}}, true},
		{v1alpha1.ApplicationSpec{Components: []string{"Web"}}, true},
		{v1alpha1.ApplicationSpec{Components: []string{"web", "web"}}, true},
		{v1alpha1.ApplicationSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}, true},
		{v1alpha1.ApplicationSpec{Labels: map[string]string{"team": "shop"}}, false},
		{v1alpha1.ApplicationSpec{Labels: map[string]string{"team": "not ok"}}, true},
	} {
		if errs := ValidateApplicationSpec(&c.spec); (len(errs) > 0) != c.bad {
			t.Errorf("%+v: errors %v, want bad=%v", c.spec, errs, c.bad)
		}
	}
}
