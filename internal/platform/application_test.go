package platform

import (
	"reflect"
	"slices"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

func TestTeardownStep(t *testing.T) {
	dep := func(c *v1alpha1.Component, on ...string) *v1alpha1.Component {
		for _, n := range on {
			c.Spec.DependsOn = append(c.Spec.DependsOn, v1alpha1.DependencyRef{Kind: "Component", Name: n})
		}
		return c
	}
	route := func(name string, backends ...string) v1alpha1.Route {
		r := v1alpha1.Route{}
		r.Name = name
		var bs []v1alpha1.RouteBackend
		for _, b := range backends {
			bs = append(bs, v1alpha1.RouteBackend{Component: b})
		}
		r.Spec.Rules = []v1alpha1.RouteRule{{Backends: bs}}
		return r
	}
	release := func(name, comp string) v1alpha1.Release {
		r := v1alpha1.Release{}
		r.Name, r.Spec.Component = name, comp
		return r
	}
	deleting := func(o client.Object) { now := metav1.Now(); o.SetDeletionTimestamp(&now) }
	// web → api → db-proxy; worker → api; a Route to web and to another app's Component; a
	// Release of api; a Route and a Release of others are not the Application's.
	all := func() ([]*v1alpha1.Component, []v1alpha1.Route, []v1alpha1.Release) {
		return []*v1alpha1.Component{dep(comp("api", ""), "db-proxy"), comp("db-proxy", ""), dep(comp("web", ""), "api"), dep(comp("worker", ""), "api")},
			[]v1alpha1.Route{route("front", "web", "elsewhere"), route("other", "elsewhere")},
			[]v1alpha1.Release{release("api", "api"), release("x", "elsewhere")}
	}
	keys := func(items []teardownItem, idx []int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, items[i].key)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		name string
		// drop removes objects (gone); mark marks them deleting.
		drop, mark []string
		now        []string
		waits      map[string][]string
	}{
		{name: "first wave: Routes, Releases and what no member depends on",
			now: []string{"Release/api", "Route/front", "Component/worker"},
			waits: map[string][]string{"Component/web": {"Route/front"}, "Component/api": {"Component/web", "Component/worker", "Release/api"},
				"Component/db-proxy": {"Component/api"}}},
		{name: "issued deletions are not issued again", mark: []string{"Release/api", "Route/front", "Component/worker"},
			waits: map[string][]string{"Component/web": {"Route/front"}, "Component/api": {"Component/web", "Component/worker", "Release/api"},
				"Component/db-proxy": {"Component/api"}}},
		{name: "the Route gone: web", drop: []string{"Route/front"}, mark: []string{"Release/api", "Component/worker"}, now: []string{"Component/web"},
			waits: map[string][]string{"Component/api": {"Component/web", "Component/worker", "Release/api"}, "Component/db-proxy": {"Component/api"}}},
		{name: "web gone, worker still going", drop: []string{"Route/front", "Release/api", "Component/web"}, mark: []string{"Component/worker"},
			waits: map[string][]string{"Component/api": {"Component/worker"}, "Component/db-proxy": {"Component/api"}}},
		{name: "api last but one", drop: []string{"Route/front", "Release/api", "Component/web", "Component/worker"}, now: []string{"Component/api"},
			waits: map[string][]string{"Component/db-proxy": {"Component/api"}}},
		{name: "db-proxy last", drop: []string{"Route/front", "Release/api", "Component/web", "Component/worker", "Component/api"}, now: []string{"Component/db-proxy"},
			waits: map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comps, routes, releases := all()
			var items []teardownItem
			for _, it := range teardownItems(comps, routes, releases) {
				if slices.Contains(tc.drop, it.key) {
					continue
				}
				if slices.Contains(tc.mark, it.key) {
					deleting(it.obj)
				}
				items = append(items, it)
			}
			now, waits := teardownStep(items)
			if got := keys(items, now); !slices.Equal(got, sorted(tc.now)) {
				t.Errorf("now %v, want %v", got, sorted(tc.now))
			}
			want := map[string][]string{}
			for k, v := range tc.waits {
				want[k] = sorted(v)
			}
			if !reflect.DeepEqual(waits, want) {
				t.Errorf("waits %v, want %v", waits, want)
			}
		})
	}
	// Nothing of another Application's: the Route "other" and the Release "x" are not items.
	comps, routes, releases := all()
	for _, it := range teardownItems(comps, routes, releases) {
		if it.key == "Route/other" || it.key == "Release/x" {
			t.Errorf("item %s is not the Application's", it.key)
		}
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
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

// TestApplicationNewestMembers: a table is built from the newest version of each member the
// watch delivered, never from an older copy the cache still holds.
func TestApplicationNewestMembers(t *testing.T) {
	at := func(c *v1alpha1.Component, rv string) *v1alpha1.Component { c.ResourceVersion = rv; return c }
	deleting := at(comp("old", lifecycle.PhaseActive), "9")
	deleting.DeletionTimestamp = &metav1.Time{}
	d := &applicationDriver{latest: map[types.NamespacedName]*v1alpha1.Component{
		{Namespace: "shop", Name: "api"}: at(comp("api", lifecycle.PhaseActive), "12"),
		{Namespace: "shop", Name: "web"}: at(comp("web", lifecycle.PhaseReconciling), "7"),
		{Namespace: "shop", Name: "new"}: at(comp("new", lifecycle.PhasePending), "15"),
		{Namespace: "shop", Name: "old"}: deleting,
	}}
	members := []member{
		{name: "api", comp: at(comp("api", lifecycle.PhaseReconciling), "10")}, // the cache lags: the watch's wins
		{name: "web", comp: at(comp("web", lifecycle.PhaseActive), "8")},       // the cache is ahead: it stays
		{name: "new"},  // not in the cache yet: the watch's
		{name: "old"},  // gone: stays gone, and is forgotten
		{name: "none"}, // never seen
	}
	d.newest("shop", members)
	got := map[string]string{}
	for _, m := range members {
		got[m.name] = "-"
		if m.comp != nil {
			got[m.name] = m.comp.ResourceVersion
		}
	}
	want := map[string]string{"api": "12", "web": "8", "new": "15", "old": "-", "none": "-"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("members' versions %v, want %v", got, want)
	}
	if _, ok := d.latest[types.NamespacedName{Namespace: "shop", Name: "old"}]; ok {
		t.Error("a deleted member is still remembered")
	}
}
