package apiservice

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func group(name string, versions ...string) metav1.APIGroup {
	g := metav1.APIGroup{Name: name}
	for _, v := range versions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: schema.GroupVersion{Group: name, Version: v}.String(), Version: v})
	}
	return g
}

func TestDesired(t *testing.T) {
	crd := sets.New(schema.GroupVersion{Group: "example.com", Version: "v2"}, schema.GroupVersion{Group: "example.com", Version: "v1"})
	got := Desired([]metav1.APIGroup{group("", "v1"), group("apps", "v1"), group("example.com", "v2", "v1"), group("batch", "v1", "v1beta1")}, crd)
	want := []struct {
		name, label    string
		group, version string
		gp, vp         int32
	}{
		{"v1.", AutoManagedOnStart, "", "v1", 18000, 15},
		{"v1.apps", AutoManagedOnStart, "apps", "v1", 17950, 15},
		{"v2.example.com", AutoManagedTrue, "example.com", "v2", 1000, 100},
		{"v1.example.com", AutoManagedTrue, "example.com", "v1", 1000, 99},
		{"v1.batch", AutoManagedOnStart, "batch", "v1", 17900, 15},
		{"v1beta1.batch", AutoManagedOnStart, "batch", "v1beta1", 17900, 12},
	}
	if len(got) != len(want) {
		t.Fatalf("%d APIServices, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Labels[AutoManagedLabel] != w.label || g.Spec.Group != w.group || g.Spec.Version != w.version ||
			g.Spec.GroupPriorityMinimum != w.gp || g.Spec.VersionPriority != w.vp || g.Spec.Service != nil {
			t.Errorf("%d: %s %v %+v, want %+v", i, g.Name, g.Labels, g.Spec, w)
		}
	}
}

func apisvc(name, label string, gp int32) *apiregistrationv1.APIService {
	a := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiregistrationv1.APIServiceSpec{GroupPriorityMinimum: gp, VersionPriority: 15}}
	if label != "" {
		a.Labels = map[string]string{AutoManagedLabel: label}
	}
	return a
}

func TestPlan(t *testing.T) {
	desired := []*apiregistrationv1.APIService{apisvc("v1.", AutoManagedOnStart, 18000), apisvc("v1.apps", AutoManagedOnStart, 17950),
		apisvc("v1.example.com", AutoManagedTrue, 1000), apisvc("v1.users.io", AutoManagedOnStart, 17000)}
	existing := []*apiregistrationv1.APIService{
		apisvc("v1.", AutoManagedOnStart, 18000),    // up to date
		apisvc("v1.apps", AutoManagedOnStart, 100),  // spec drifted
		apisvc("v1.gone.io", AutoManagedTrue, 1000), // CRD deleted
		apisvc("v1.metrics.k8s.io", "", 100),        // a user's, not served locally
		apisvc("v1.users.io", "", 5),                // a user's of a served group-version
	}
	create, update, del := Plan(existing, desired)
	if len(create) != 1 || create[0].Name != "v1.example.com" {
		t.Errorf("create %v", names(create))
	}
	if len(update) != 1 || update[0].Name != "v1.apps" || update[0].Spec.GroupPriorityMinimum != 17950 {
		t.Errorf("update %v", names(update))
	}
	if len(del) != 1 || del[0] != "v1.gone.io" {
		t.Errorf("delete %v", del)
	}
	if existing[1].Spec.GroupPriorityMinimum != 100 {
		t.Error("Plan changed an existing object")
	}
}

func names(as []*apiregistrationv1.APIService) (out []string) {
	for _, a := range as {
		out = append(out, a.Name)
	}
	return out
}

func TestAvailable(t *testing.T) {
	local := apisvc("v1.", AutoManagedOnStart, 18000)
	if c := Available(); c.Status != apiregistrationv1.ConditionTrue || c.Reason != "Local" {
		t.Errorf("local: %+v", c)
	}
	if !NeedsStatus(local, Available()) {
		t.Error("a local APIService without status needs none")
	}
	local.Status.Conditions = []apiregistrationv1.APIServiceCondition{Available()}
	if NeedsStatus(local, Available()) {
		t.Error("an up-to-date status is rewritten")
	}
}
