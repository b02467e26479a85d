package rbac

import (
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, ns, name string) Attributes {
		return Attributes{ResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	path := func(verb, p string) Attributes { return Attributes{Verb: verb, Path: p} }
	r := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	s := func(v ...string) []string { return v }
	cases := []struct {
		name string
		rule rbacv1.PolicyRule
		a    Attributes
		want bool
	}{
		{"exact", r(s("get"), s(""), s("pods"), nil), res("get", "", "pods", "", "ns", "p"), true},
		{"other verb", r(s("get"), s(""), s("pods"), nil), res("list", "", "pods", "", "ns", ""), false},
		{"other group", r(s("get"), s("apps"), s("pods"), nil), res("get", "", "pods", "", "ns", "p"), false},
		{"verb *", r(s("*"), s(""), s("pods"), nil), res("deletecollection", "", "pods", "", "ns", ""), true},
		{"group *", r(s("get"), s("*"), s("deployments"), nil), res("get", "apps", "deployments", "", "ns", "d"), true},
		{"resource *", r(s("get"), s(""), s("*"), nil), res("get", "", "secrets", "", "ns", "s"), true},
		{"resource * covers subresources", r(s("get"), s(""), s("*"), nil), res("get", "", "pods", "log", "ns", "p"), true},
		{"resource does not cover its subresource", r(s("get"), s(""), s("pods"), nil), res("get", "", "pods", "log", "ns", "p"), false},
		{"resource/subresource", r(s("get"), s(""), s("pods/log"), nil), res("get", "", "pods", "log", "ns", "p"), true},
		{"resource/subresource is not the resource", r(s("get"), s(""), s("pods/log"), nil), res("get", "", "pods", "", "ns", "p"), false},
		{"*/subresource", r(s("update"), s("*"), s("*/status"), nil), res("update", "apps", "deployments", "status", "ns", "d"), true},
		{"*/subresource other subresource", r(s("update"), s("*"), s("*/status"), nil), res("update", "apps", "deployments", "scale", "ns", "d"), false},
		{"resourceNames match", r(s("get"), s(""), s("configmaps"), s("a", "b")), res("get", "", "configmaps", "", "ns", "b"), true},
		{"resourceNames other name", r(s("get"), s(""), s("configmaps"), s("a")), res("get", "", "configmaps", "", "ns", "c"), false},
		{"resourceNames never match unnamed (list)", r(s("list"), s(""), s("configmaps"), s("a")), res("list", "", "configmaps", "", "ns", ""), false},
		{"nonResourceURL exact", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/healthz")}, path("get", "/healthz"), true},
		{"nonResourceURL prefix *", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/apis/*")}, path("get", "/apis/apps/v1"), true},
		{"nonResourceURL no prefix match", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/apis")}, path("get", "/apis/apps"), false},
		{"nonResourceURL *", rbacv1.PolicyRule{Verbs: s("*"), NonResourceURLs: s("*")}, path("post", "/anything"), true},
		{"nonResourceURL other verb", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/metrics")}, path("post", "/metrics"), false},
		{"resource rule does not grant paths", r(s("*"), s("*"), s("*"), nil), path("get", "/metrics"), false},
		{"path rule does not grant resources", rbacv1.PolicyRule{Verbs: s("*"), NonResourceURLs: s("*")}, res("get", "", "pods", "", "ns", "p"), false},
	}
	for _, c := range cases {
		if got := RuleAllows(&c.a, &c.rule); got != c.want {
			t.Errorf("%s: RuleAllows = %v, want %v", c.name, got, c.want)
		}
	}
}

func meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func TestSnapshotAllows(t *testing.T) {
	cmRead := []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}
	all := []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}
	roles := []*rbacv1.Role{{ObjectMeta: meta("a", "cm-read"), Rules: cmRead}}
	clusterRoles := []*rbacv1.ClusterRole{{ObjectMeta: meta("", "all"), Rules: all}, {ObjectMeta: meta("", "cm-read"), Rules: cmRead}}
	user := func(n string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: n} }
	group := func(n string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: n} }
	sa := func(ns, n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: n}
	}
	roleBindings := []*rbacv1.RoleBinding{
		{ObjectMeta: meta("a", "alice"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "cm-read"}, Subjects: []rbacv1.Subject{user("alice")}},
		{ObjectMeta: meta("a", "devs"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "all"}, Subjects: []rbacv1.Subject{group("devs")}},
		{ObjectMeta: meta("a", "robot"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cm-read"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "robot"}}},
		{ObjectMeta: meta("b", "dangling"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "missing"}, Subjects: []rbacv1.Subject{user("alice")}},
		{ObjectMeta: meta("b", "other-ns-role"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "cm-read"}, Subjects: []rbacv1.Subject{user("bob")}},
	}
	crbs := []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: meta("", "ops"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cm-read"}, Subjects: []rbacv1.Subject{group("ops"), sa("kube-system", "reader")}},
	}
	s := Build(roles, clusterRoles, roleBindings, crbs)
	get := func(u string, groups []string, ns string) Attributes {
		return Attributes{User: u, Groups: groups, ResourceRequest: true, Verb: "get", Resource: "configmaps", Namespace: ns, Name: "x"}
	}
	del := func(u string, groups []string, ns string) Attributes {
		a := get(u, groups, ns)
		a.Verb = "delete"
		return a
	}
	cases := []struct {
		name string
		a    Attributes
		want bool
	}{
		{"role binding to user", get("alice", nil, "a"), true},
		{"role binding limited to its namespace", get("alice", nil, "c"), false},
		{"role binding limited to the role's rules", del("alice", nil, "a"), false},
		{"role binding to group", del("carol", []string{"devs"}, "a"), true},
		{"group binding not elsewhere", del("carol", []string{"devs"}, "b"), false},
		{"service account, namespace defaulted to the binding's", get("system:serviceaccount:a:robot", nil, "a"), true},
		{"service account of another namespace", get("system:serviceaccount:b:robot", nil, "a"), false},
		{"cluster role binding in every namespace", get("dave", []string{"ops"}, "zzz"), true},
		{"cluster role binding at cluster scope", get("dave", []string{"ops"}, ""), true},
		{"cluster role binding to a service account", get("system:serviceaccount:kube-system:reader", nil, "q"), true},
		{"dangling roleRef grants nothing", get("alice", nil, "b"), false},
		{"a Role is resolved in the binding's namespace", get("bob", nil, "b"), false},
		{"nobody", get("mallory", []string{"system:authenticated"}, "a"), false},
	}
	for _, c := range cases {
		if got := s.Allows(&c.a); got != c.want {
			t.Errorf("%s: Allows = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCovers(t *testing.T) {
	r := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	s := func(v ...string) []string { return v }
	cases := []struct {
		name           string
		owner, servant []rbacv1.PolicyRule
		want           bool
	}{
		{"same", []rbacv1.PolicyRule{r(s("get"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{r(s("get"), s(""), s("pods"), nil)}, true},
		{"star covers", []rbacv1.PolicyRule{r(s("*"), s("*"), s("*"), nil)}, []rbacv1.PolicyRule{r(s("get", "delete"), s("apps"), s("deployments/scale"), s("x"))}, true},
		{"verb missing", []rbacv1.PolicyRule{r(s("get"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{r(s("get", "delete"), s(""), s("pods"), nil)}, false},
		{"names do not cover all", []rbacv1.PolicyRule{r(s("get"), s(""), s("pods"), s("a"))}, []rbacv1.PolicyRule{r(s("get"), s(""), s("pods"), nil)}, false},
		{"*/status covers x/status", []rbacv1.PolicyRule{r(s("get"), s(""), s("*/status"), nil)}, []rbacv1.PolicyRule{r(s("get"), s(""), s("pods/status"), nil)}, true},
		{"split across rules", []rbacv1.PolicyRule{r(s("get"), s(""), s("pods"), nil), r(s("list"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{r(s("get", "list"), s(""), s("pods"), nil)}, true},
		{"url prefix", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/*")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/apps")}}, true},
	}
	for _, c := range cases {
		if got, _ := Covers(c.owner, c.servant); got != c.want {
			t.Errorf("%s: Covers = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAggregatedRules(t *testing.T) {
	byName := map[string]*rbacv1.ClusterRole{}
	for _, r := range BootstrapClusterRoles() {
		byName[r.Name] = r
	}
	all := BootstrapClusterRoles()
	// Iterate to the fixed point the controller reaches (view feeds edit feeds admin).
	for range 3 {
		for _, r := range all {
			if r.AggregationRule != nil {
				r.Rules = AggregatedRules(r, all)
			}
		}
	}
	s := Build(nil, all, []*rbacv1.RoleBinding{
		{ObjectMeta: meta("ns", "e"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "e"}}},
		{ObjectMeta: meta("ns", "v"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "v"}}},
		{ObjectMeta: meta("ns", "a"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "a"}}},
	}, nil)
	q := func(user, verb, group, resource string) bool {
		return s.Allows(&Attributes{User: user, ResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Namespace: "ns"})
	}
	for _, c := range []struct {
		user, verb, group, resource string
		want                        bool
	}{
		{"v", "list", "", "configmaps", true}, {"v", "create", "", "configmaps", false}, {"v", "get", "", "secrets", false},
		{"e", "list", "", "configmaps", true}, {"e", "create", "", "configmaps", true}, {"e", "get", "", "secrets", true},
		{"e", "create", "rbac.authorization.k8s.io", "roles", false},
		{"a", "create", "rbac.authorization.k8s.io", "roles", true}, {"a", "delete", "apps", "deployments", true},
	} {
		if got := q(c.user, c.verb, c.group, c.resource); got != c.want {
			t.Errorf("%s %s %s.%s = %v, want %v", c.user, c.verb, c.resource, c.group, got, c.want)
		}
	}
	if len(byName["edit"].Rules) != 0 {
		t.Errorf("BootstrapClusterRoles shares state between calls")
	}
}

// BenchmarkAuthorize: the decision with 10,000 Roles and 10,000 RoleBindings (one per
// user, in 100 namespaces) plus the bootstrap ClusterRoles, for an allowed request that
// needs the user's RoleBinding and for a denied one (every grant of the user and its
// groups checked).
func BenchmarkAuthorize(b *testing.B) {
	const n, namespaces = 10000, 100
	var roles []*rbacv1.Role
	var bindings []*rbacv1.RoleBinding
	for i := range n {
		ns := fmt.Sprintf("ns-%d", i%namespaces)
		name := fmt.Sprintf("role-%d", i)
		roles = append(roles, &rbacv1.Role{ObjectMeta: meta(ns, name), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}},
			{Verbs: []string{"create", "update"}, APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}},
		}})
		bindings = append(bindings, &rbacv1.RoleBinding{ObjectMeta: meta(ns, "b-"+name), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: fmt.Sprintf("user-%d", i)}, {Kind: rbacv1.GroupKind, Name: fmt.Sprintf("team-%d", i%50)}}})
	}
	crbs := BootstrapClusterRoleBindings()
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Build(roles, BootstrapClusterRoles(), bindings, crbs)
		}
	})
	s := Build(roles, BootstrapClusterRoles(), bindings, crbs)
	groups := []string{"team-7", "system:authenticated"}
	allowed := Attributes{User: "user-4207", Groups: groups, ResourceRequest: true, Verb: "update", APIGroup: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns-7", Name: "d"}
	denied := allowed
	denied.Verb = "delete"
	for _, c := range []struct {
		name string
		a    *Attributes
		want bool
	}{{"allowed", &allowed, true}, {"denied", &denied, false}} {
		b.Run(c.name, func(b *testing.B) {
			if s.Allows(c.a) != c.want {
				b.Fatalf("Allows = %v, want %v", !c.want, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Allows(c.a)
			}
		})
	}
}
