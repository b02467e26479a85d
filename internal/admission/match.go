package admission

import (
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// RuleMatches reports whether an admissionregistration rule selects the request, as
// upstream: operations, apiGroups, apiVersions and resources ("*", "pods", "pods/status",
// "*/status", "pods/*") and scope. With exactVersion false (matchPolicy Equivalent) any
// version of the group and resource matches.
func RuleMatches(r admissionregistrationv1.RuleWithOperations, a *Attributes, namespaced, exactVersion bool) bool {
	if !matchesAny(opStrings(r.Operations), string(a.Operation)) {
		return false
	}
	if !matchesAny(r.APIGroups, a.Resource.Group) {
		return false
	}
	if exactVersion && !matchesAny(r.APIVersions, a.Resource.Version) {
		return false
	}
	if !resourceMatches(r.Resources, a.Resource.Resource, a.Subresource) {
		return false
	}
	scope := admissionregistrationv1.AllScopes
	if r.Scope != nil {
		scope = *r.Scope
	}
	switch scope {
	case admissionregistrationv1.ClusterScope:
		return !namespaced
	case admissionregistrationv1.NamespacedScope:
		return namespaced
	}
	return true
}

func opStrings(ops []admissionregistrationv1.OperationType) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

func matchesAny(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

func resourceMatches(list []string, resource, sub string) bool {
	combined := resource
	if sub != "" {
		combined += "/" + sub
	}
	for _, r := range list {
		switch {
		case r == "*/*":
			return true
		case r == "*" && sub == "":
			return true
		case r == combined:
			return true
		case strings.HasPrefix(r, "*/") && sub != "" && r[2:] == sub:
			return true
		case strings.HasSuffix(r, "/*") && sub != "" && r[:len(r)-2] == resource:
			return true
		}
	}
	return false
}

// SelectorMatches evaluates a label selector (nil or empty selects everything).
func SelectorMatches(sel *metav1.LabelSelector, lbls map[string]string) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(lbls)), nil
}

// ObjectSelectorMatches is upstream's objectSelector rule: the object or the old object
// matches. A connect's options object has no labels (no metadata at all): a selector that
// selects something never matches it, as upstream's, even one that would match no labels.
func ObjectSelectorMatches(sel *metav1.LabelSelector, a *Attributes) (bool, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return true, nil
	}
	for _, o := range []map[string]string{labelsOf(a, false), labelsOf(a, true)} {
		if o == nil {
			continue
		}
		ok, err := SelectorMatches(sel, o)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func labelsOf(a *Attributes, old bool) map[string]string {
	o := a.Object
	if old {
		o = a.OldObject
	}
	if o == nil || a.Operation == Connect {
		return nil
	}
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	return l
}
