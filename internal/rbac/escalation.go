package rbac

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
)

// Escalation is the validating admission step that prevents privilege escalation through
// RBAC objects, as upstream's RBAC storage does (ConfirmNoEscalation): a user may create or
// update a Role or ClusterRole only with rules they hold themselves (in the namespace of the
// role) unless they may "escalate" it, and a RoleBinding or ClusterRoleBinding only to a
// role whose rules they hold unless they may "bind" it. system:masters may do anything.
type Escalation struct {
	Authorizer *Authorizer
}

var _ admission.Interface = (*Escalation)(nil)

// Admit implements admission.Interface; Escalation changes nothing.
func (*Escalation) Admit(context.Context, *admission.Attributes) error { return nil }

// fullAuthority is what creating a ClusterRole with an aggregationRule requires (its rules
// are whatever the selected roles grant).
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Validate implements admission.Interface.
func (e *Escalation) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.Group != rbacv1.GroupName || a.Subresource != "" || a.Operation == admission.Delete || a.Object == nil {
		return nil
	}
	u := a.User
	if u == nil || slices.Contains(u.Groups, filters.MastersGroup) {
		return nil
	}
	snap := e.Authorizer.Snapshot()
	gr := a.Resource.GroupResource()
	switch a.Resource.Resource {
	case "roles", "clusterroles":
		if e.allowed(u, "escalate", a.Resource.Resource, a.Namespace, a.Name) {
			return nil
		}
		rules, agg, err := roleRules(a.Object)
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		if a.OldObject != nil {
			oldRules, oldAgg, err := roleRules(a.OldObject)
			if err == nil && reflect.DeepEqual(rules, oldRules) && reflect.DeepEqual(agg, oldAgg) {
				return nil // metadata-only change (labels, finalizers): nothing granted
			}
		}
		if agg != nil {
			rules = fullAuthority
		}
		if err := confirmNoEscalation(snap, u, a.Namespace, rules); err != nil {
			return apierrors.NewForbidden(gr, a.Name, err)
		}
	case "rolebindings", "clusterrolebindings":
		ref, subjects, err := bindingRef(a.Object)
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		if a.OldObject != nil {
			oldRef, oldSubjects, err := bindingRef(a.OldObject)
			if err == nil && ref == oldRef && reflect.DeepEqual(subjects, oldSubjects) {
				return nil
			}
		}
		refResource := "clusterroles"
		if ref.Kind == "Role" {
			refResource = "roles"
		}
		if e.allowed(u, "bind", refResource, a.Namespace, ref.Name) {
			return nil
		}
		rules, err := snap.RoleRefRules(ref, a.Namespace)
		if err != nil {
			return apierrors.NewForbidden(gr, a.Name, err)
		}
		if err := confirmNoEscalation(snap, u, a.Namespace, rules); err != nil {
			return apierrors.NewForbidden(gr, a.Name, err)
		}
	}
	return nil
}

func (e *Escalation) allowed(u *request.User, verb, resource, namespace, name string) bool {
	return e.Authorizer.Snapshot().Allows(&Attributes{User: u.Name, Groups: u.Groups, ResourceRequest: true,
		Verb: verb, APIGroup: rbacv1.GroupName, Resource: resource, Namespace: namespace, Name: name})
}

// confirmNoEscalation is upstream's ConfirmNoEscalation over the snapshot: the user's rules
// in namespace must cover rules.
func confirmNoEscalation(s *Snapshot, u *request.User, namespace string, rules []rbacv1.PolicyRule) error {
	ok, missing := Covers(s.RulesFor(u.Name, u.Groups, namespace), rules)
	if ok {
		return nil
	}
	descs := make([]string, 0, len(missing))
	for _, r := range compactRules(missing) {
		descs = append(descs, CompactString(r))
	}
	sort.Strings(descs)
	descs = slices.Compact(descs)
	return fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(descs, "\n"))
}

// compactRules merges broken-down rules that differ only in their verb, as upstream's
// CompactRules does for simple resource rules.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name, url string }
	idx := map[key]int{}
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		k := key{first(r.APIGroups), first(r.Resources), first(r.ResourceNames), first(r.NonResourceURLs)}
		if i, ok := idx[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		idx[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func roleRules(obj *unstructured.Unstructured) ([]rbacv1.PolicyRule, *rbacv1.AggregationRule, error) {
	var cr rbacv1.ClusterRole // a Role's fields are a subset
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr); err != nil {
		return nil, nil, err
	}
	return cr.Rules, cr.AggregationRule, nil
}

func bindingRef(obj *unstructured.Unstructured) (rbacv1.RoleRef, []rbacv1.Subject, error) {
	var b rbacv1.ClusterRoleBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
		return rbacv1.RoleRef{}, nil, err
	}
	if b.RoleRef.Name == "" {
		return b.RoleRef, nil, errors.New("roleRef.name is required")
	}
	return b.RoleRef, b.Subjects, nil
}
