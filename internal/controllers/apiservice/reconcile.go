package apiservice

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// AutoManagedLabel marks the APIServices this controller owns; its values are
// AutoManagedOnStart (built-in groups) and AutoManagedTrue (CRD groups), as upstream's.
const (
	AutoManagedLabel   = "kube-aggregator.kubernetes.io/automanaged"
	AutoManagedOnStart = "onstart"
	AutoManagedTrue    = "true"
)

// Name is an APIService's name for a group-version ("v1." for the core group).
func Name(gv schema.GroupVersion) string { return gv.Version + "." + gv.Group }

// Desired are the local APIServices for the served groups, in discovery's order (the most
// preferred first); crd holds the group-versions that CustomResourceDefinitions serve. A
// built-in group's priority falls with its place in discovery, from the core group's 18000;
// a CRD group gets upstream's crdregistration priorities (1000, versions 100 down).
func Desired(groups []metav1.APIGroup, crd sets.Set[schema.GroupVersion]) []*apiregistrationv1.APIService {
	var out []*apiregistrationv1.APIService
	builtin := 0
	for _, g := range groups {
		isCRD := len(g.Versions) > 0 && crd.Has(schema.GroupVersion{Group: g.Name, Version: g.Versions[0].Version})
		groupPriority := int32(1000)
		if !isCRD {
			groupPriority = max(18000-int32(builtin)*50, 1100)
			builtin++
		}
		for j, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			label, versionPriority := AutoManagedOnStart, max(int32(15-3*j), 1)
			if crd.Has(gv) {
				label, versionPriority = AutoManagedTrue, max(int32(100-j), 1)
			}
			out = append(out, &apiregistrationv1.APIService{
				ObjectMeta: metav1.ObjectMeta{Name: Name(gv), Labels: map[string]string{AutoManagedLabel: label}},
				Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
					GroupPriorityMinimum: groupPriority, VersionPriority: versionPriority},
			})
		}
	}
	return out
}

// Plan compares existing APIServices with the desired ones: what to create, what to update
// (an automanaged one whose spec or label differs, with the desired spec on the existing
// object), and which automanaged ones to delete. Users' APIServices are never in the plan.
func Plan(existing, desired []*apiregistrationv1.APIService) (create, update []*apiregistrationv1.APIService, del []string) {
	have := map[string]*apiregistrationv1.APIService{}
	for _, a := range existing {
		have[a.Name] = a
	}
	want := map[string]bool{}
	for _, d := range desired {
		want[d.Name] = true
		cur, ok := have[d.Name]
		switch {
		case !ok:
			create = append(create, d)
		case cur.Labels[AutoManagedLabel] == "":
			// A user's APIService of the same name wins, as upstream leaves it.
		case !equality.Semantic.DeepEqual(cur.Spec, d.Spec) || cur.Labels[AutoManagedLabel] != d.Labels[AutoManagedLabel]:
			u := cur.DeepCopy()
			u.Spec = d.Spec
			u.Labels = maps.Clone(u.Labels)
			u.Labels[AutoManagedLabel] = d.Labels[AutoManagedLabel]
			update = append(update, u)
		}
	}
	for _, a := range existing {
		if !want[a.Name] && a.Labels[AutoManagedLabel] != "" {
			del = append(del, a.Name)
		}
	}
	slices.Sort(del)
	return create, update, del
}

// Available is the Available condition of a local APIService: True, reason Local.
func Available() apiregistrationv1.APIServiceCondition {
	return apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue,
		Reason: "Local", Message: "Local APIServices are always available"}
}

// NeedsStatus reports whether a's Available condition differs from want (its time aside).
func NeedsStatus(a *apiregistrationv1.APIService, want apiregistrationv1.APIServiceCondition) bool {
	for _, c := range a.Status.Conditions {
		if c.Type == want.Type {
			return c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message
		}
	}
	return true
}
