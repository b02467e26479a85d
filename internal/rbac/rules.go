package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Attributes are what a request asks to do, as the authorizer sees it.
type Attributes struct {
	// User is the user name, Groups the user's groups.
	User   string
	Groups []string
	// ResourceRequest says the request names a resource; otherwise Path is a non-resource
	// URL and Verb the lower-case HTTP method.
	ResourceRequest bool
	Verb            string
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string
}

// RuleAllows reports whether rule grants the request, with upstream's semantics: "*" in
// verbs, apiGroups and resources; "*/<subresource>" and "<resource>/<subresource>" for
// subresources; resourceNames limit the names (a request without a name, e.g. list or
// create, never matches a rule with resourceNames); nonResourceURLs match exactly or by a
// trailing "*" prefix.
func RuleAllows(a *Attributes, rule *rbacv1.PolicyRule) bool {
	if !verbMatches(rule, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		return nonResourceURLMatches(rule, a.Path)
	}
	return apiGroupMatches(rule, a.APIGroup) &&
		resourceMatches(rule, a.Resource, a.Subresource) &&
		resourceNameMatches(rule, a.Name)
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

func resourceMatches(rule *rbacv1.PolicyRule, resource, subresource string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll {
			return true
		}
		if subresource == "" {
			if r == resource {
				return true
			}
			continue
		}
		// "<resource>/<subresource>" or "*/<subresource>", without building the string.
		res, sub, ok := strings.Cut(r, "/")
		if ok && sub == subresource && (res == resource || res == "*") {
			return true
		}
	}
	return false
}

func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	return name != "" && slices.Contains(rule.ResourceNames, name)
}

func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")) {
			return true
		}
	}
	return false
}

// Covers reports whether owner grants everything servant grants, and returns the parts of
// servant (broken down to one verb, resource and name each) that owner lacks. It is
// upstream's policy comparator (k8s.io/component-helpers/auth/rbac/validation).
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, s := range servant {
		for _, sub := range breakdown(s) {
			if !slices.ContainsFunc(owner, func(o rbacv1.PolicyRule) bool { return ruleCovers(&o, &sub) }) {
				missing = append(missing, sub)
			}
		}
	}
	return len(missing) == 0, missing
}

// breakdown splits a rule into rules of at most one verb, resource and resource name.
func breakdown(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			for _, v := range rule.Verbs {
				if len(rule.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: []string{v}})
					continue
				}
				for _, n := range rule.ResourceNames {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: []string{v}, ResourceNames: []string{n}})
				}
			}
		}
	}
	for _, u := range rule.NonResourceURLs {
		for _, v := range rule.Verbs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
		}
	}
	return out
}

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

func resourcesCover(owner, want []string) bool {
	if slices.Contains(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, r := range want {
		if slices.Contains(owner, r) {
			continue
		}
		_, sub, ok := strings.Cut(r, "/")
		if !ok || !slices.Contains(owner, "*/"+sub) {
			return false
		}
	}
	return true
}

func nonResourceURLCovers(owner, path string) bool {
	return owner == path || (strings.HasSuffix(owner, "*") && strings.HasPrefix(path, strings.TrimRight(owner, "*")))
}

func ruleCovers(owner, sub *rbacv1.PolicyRule) bool {
	if !(slices.Contains(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)) {
		return false
	}
	if !(slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)) {
		return false
	}
	if !resourcesCover(owner.Resources, sub.Resources) {
		return false
	}
	for _, u := range sub.NonResourceURLs {
		if !slices.ContainsFunc(owner.NonResourceURLs, func(o string) bool { return nonResourceURLCovers(o, u) }) {
			return false
		}
	}
	if len(sub.ResourceNames) == 0 {
		return len(owner.ResourceNames) == 0
	}
	return len(owner.ResourceNames) == 0 || hasAll(owner.ResourceNames, sub.ResourceNames)
}

// CompactString formats a rule as upstream's rbacv1helpers.CompactString does, for error
// messages: {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, vals []string) {
		if len(vals) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, vals))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
