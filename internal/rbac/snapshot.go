package rbac

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Snapshot is an immutable, indexed view of every Role, ClusterRole, RoleBinding and
// ClusterRoleBinding. Safe for concurrent use.
type Snapshot struct {
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[nsName]*rbacv1.Role
	// cluster indexes the ClusterRoleBindings, namespaced the RoleBindings of each namespace.
	cluster    subjectIndex
	namespaced map[string]*subjectIndex
}

type nsName struct{ namespace, name string }

// subjectIndex maps subjects to the rules their bindings grant. Service accounts are
// indexed under their user name (system:serviceaccount:<ns>:<name>).
type subjectIndex struct {
	users  map[string][]grant
	groups map[string][]grant
}

// grant is one binding's rules, resolved when the snapshot is built.
type grant struct {
	binding string // "RoleBinding ns/name" style, for reviews and debugging
	rules   []rbacv1.PolicyRule
}

// Build indexes the RBAC objects. A binding whose role does not exist grants nothing, as
// upstream.
func Build(roles []*rbacv1.Role, clusterRoles []*rbacv1.ClusterRole, roleBindings []*rbacv1.RoleBinding, clusterRoleBindings []*rbacv1.ClusterRoleBinding) *Snapshot {
	s := &Snapshot{
		clusterRoles: make(map[string]*rbacv1.ClusterRole, len(clusterRoles)),
		roles:        make(map[nsName]*rbacv1.Role, len(roles)),
		cluster:      subjectIndex{users: map[string][]grant{}, groups: map[string][]grant{}},
		namespaced:   map[string]*subjectIndex{},
	}
	for _, r := range clusterRoles {
		s.clusterRoles[r.Name] = r
	}
	for _, r := range roles {
		s.roles[nsName{r.Namespace, r.Name}] = r
	}
	for _, b := range clusterRoleBindings {
		if b.RoleRef.Kind != "ClusterRole" {
			continue
		}
		r, ok := s.clusterRoles[b.RoleRef.Name]
		if !ok {
			continue
		}
		s.cluster.add(b.Subjects, "", grant{binding: "ClusterRoleBinding " + b.Name, rules: r.Rules})
	}
	for _, b := range roleBindings {
		rules, ok := s.roleRefRules(b.RoleRef, b.Namespace)
		if !ok {
			continue
		}
		idx := s.namespaced[b.Namespace]
		if idx == nil {
			idx = &subjectIndex{users: map[string][]grant{}, groups: map[string][]grant{}}
			s.namespaced[b.Namespace] = idx
		}
		idx.add(b.Subjects, b.Namespace, grant{binding: "RoleBinding " + b.Namespace + "/" + b.Name, rules: rules})
	}
	return s
}

// roleRefRules resolves a binding's roleRef in namespace.
func (s *Snapshot) roleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, bool) {
	switch ref.Kind {
	case "ClusterRole":
		r, ok := s.clusterRoles[ref.Name]
		if !ok {
			return nil, false
		}
		return r.Rules, true
	case "Role":
		r, ok := s.roles[nsName{namespace, ref.Name}]
		if !ok {
			return nil, false
		}
		return r.Rules, true
	}
	return nil, false
}

// RoleRefRules returns the rules a binding in namespace ("" for a ClusterRoleBinding) with
// roleRef ref would grant, or an error naming the missing role.
func (s *Snapshot) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	if rules, ok := s.roleRefRules(ref, namespace); ok {
		return rules, nil
	}
	switch ref.Kind {
	case "ClusterRole":
		return nil, fmt.Errorf("clusterrole.rbac.authorization.k8s.io %q not found", ref.Name)
	case "Role":
		return nil, fmt.Errorf("role.rbac.authorization.k8s.io %q not found", ref.Name)
	}
	return nil, fmt.Errorf("unsupported roleRef kind %q", ref.Kind)
}

func (idx *subjectIndex) add(subjects []rbacv1.Subject, bindingNS string, g grant) {
	for _, sub := range subjects {
		switch sub.Kind {
		case rbacv1.UserKind:
			idx.users[sub.Name] = append(idx.users[sub.Name], g)
		case rbacv1.GroupKind:
			idx.groups[sub.Name] = append(idx.groups[sub.Name], g)
		case rbacv1.ServiceAccountKind:
			ns := sub.Namespace
			if ns == "" {
				ns = bindingNS
			}
			if ns == "" {
				continue
			}
			u := ServiceAccountUser(ns, sub.Name)
			idx.users[u] = append(idx.users[u], g)
		}
	}
}

// ServiceAccountUser is the user name of a service account.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// allows reports whether a grant of idx to a's user or groups allows a.
func (idx *subjectIndex) allows(a *Attributes) bool {
	if idx == nil {
		return false
	}
	if grantsAllow(idx.users[a.User], a) {
		return true
	}
	for _, g := range a.Groups {
		if grantsAllow(idx.groups[g], a) {
			return true
		}
	}
	return false
}

func grantsAllow(gs []grant, a *Attributes) bool {
	for i := range gs {
		rules := gs[i].rules
		for j := range rules {
			if RuleAllows(a, &rules[j]) {
				return true
			}
		}
	}
	return false
}

// Allows is the RBAC decision: a ClusterRoleBinding of the user or one of their groups
// grants the request, or (for a request in a namespace) a RoleBinding in that namespace
// does.
func (s *Snapshot) Allows(a *Attributes) bool {
	if s.cluster.allows(a) {
		return true
	}
	if a.Namespace != "" {
		return s.namespaced[a.Namespace].allows(a)
	}
	return false
}

// RulesFor returns every rule that applies to the user in namespace: those of their
// ClusterRoleBindings, plus, when namespace is not empty, those of their RoleBindings there.
// The slice is new; the rules are shared and must not be changed.
func (s *Snapshot) RulesFor(user string, groups []string, namespace string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	collect := func(idx *subjectIndex) {
		if idx == nil {
			return
		}
		for _, g := range idx.users[user] {
			out = append(out, g.rules...)
		}
		for _, grp := range groups {
			for _, g := range idx.groups[grp] {
				out = append(out, g.rules...)
			}
		}
	}
	collect(&s.cluster)
	if namespace != "" {
		collect(s.namespaced[namespace])
	}
	return out
}

// ClusterRoles returns the ClusterRoles of the snapshot (shared; do not change them).
func (s *Snapshot) ClusterRoles() map[string]*rbacv1.ClusterRole { return s.clusterRoles }
