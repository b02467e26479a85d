package registry

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RBAC names may be anything that fits in a URL path segment (system:node, ...).
var nameRBAC NameFunc = path.ValidatePathSegmentName

func roleKind() *Kind {
	k := kindBase(rbacv1.GroupName, "v1", "roles", "role", func() *rbacv1.Role { return &rbacv1.Role{} }, func() *rbacv1.RoleList { return &rbacv1.RoleList{} })
	k.Namespaced = true
	k.FullColumns = true
	k.Columns = []Column{NameColumn(), createdAtColumn()}
	k.Strategy = &typedStrategy[*rbacv1.Role]{
		namespaced: true,
		name:       nameRBAC,
		newObj:     func() *rbacv1.Role { return &rbacv1.Role{} },
		validate:   func(r *rbacv1.Role) field.ErrorList { return validateRules(r.Rules, true) },
	}
	return &k
}

func clusterRoleKind() *Kind {
	k := kindBase(rbacv1.GroupName, "v1", "clusterroles", "clusterrole", func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} }, func() *rbacv1.ClusterRoleList { return &rbacv1.ClusterRoleList{} })
	k.FullColumns = true
	k.Columns = []Column{NameColumn(), createdAtColumn()}
	k.Strategy = &typedStrategy[*rbacv1.ClusterRole]{
		name:   nameRBAC,
		newObj: func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} },
		validate: func(r *rbacv1.ClusterRole) field.ErrorList {
			errs := validateRules(r.Rules, false)
			if r.AggregationRule != nil {
				fld := field.NewPath("aggregationRule", "clusterRoleSelectors")
				if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
					errs = append(errs, field.Required(fld, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
				}
				for i := range r.AggregationRule.ClusterRoleSelectors {
					errs = append(errs, metav1validation.ValidateLabelSelector(&r.AggregationRule.ClusterRoleSelectors[i],
						metav1validation.LabelSelectorValidationOptions{}, fld.Index(i))...)
				}
			}
			return errs
		},
	}
	return &k
}

func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		fld := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(fld.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(fld.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(fld.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(fld.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(fld.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

// defaultBinding applies the rbac/v1 defaults: roleRef.apiGroup and the apiGroup of User and
// Group subjects are rbac.authorization.k8s.io when empty.
func defaultBinding(obj *unstructured.Unstructured) {
	if ref, ok := obj.Object["roleRef"].(map[string]any); ok {
		if g, _ := ref["apiGroup"].(string); g == "" {
			ref["apiGroup"] = rbacv1.GroupName
		}
	}
	subjects, _ := obj.Object["subjects"].([]any)
	for _, s := range subjects {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		if g, _ := m["apiGroup"].(string); g == "" {
			switch m["kind"] {
			case rbacv1.UserKind, rbacv1.GroupKind:
				m["apiGroup"] = rbacv1.GroupName
			}
		}
	}
}

// bindingColumns: Role, Age, then the wide Users, Groups and ServiceAccounts.
func bindingColumns(what string) []Column {
	subjects := func(obj *unstructured.Unstructured, kind string) string {
		list, _ := obj.Object["subjects"].([]any)
		var out []string
		for _, s := range list {
			m, ok := s.(map[string]any)
			if !ok || m["kind"] != kind {
				continue
			}
			name, _ := m["name"].(string)
			if kind == rbacv1.ServiceAccountKind {
				ns, _ := m["namespace"].(string)
				name = ns + "/" + name
			}
			out = append(out, name)
		}
		return strings.Join(out, ", ")
	}
	return []Column{
		NameColumn(),
		{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"],
			Cell: func(obj *unstructured.Unstructured) any {
				return str(obj, "roleRef", "kind") + "/" + str(obj, "roleRef", "name")
			}},
		AgeColumn(),
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + what,
			Cell: func(obj *unstructured.Unstructured) any { return subjects(obj, rbacv1.UserKind) }},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + what,
			Cell: func(obj *unstructured.Unstructured) any { return subjects(obj, rbacv1.GroupKind) }},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + what,
			Cell: func(obj *unstructured.Unstructured) any { return subjects(obj, rbacv1.ServiceAccountKind) }},
	}
}

func roleBindingKind() *Kind {
	k := kindBase(rbacv1.GroupName, "v1", "rolebindings", "rolebinding", func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} }, func() *rbacv1.RoleBindingList { return &rbacv1.RoleBindingList{} })
	k.Namespaced = true
	k.FullColumns = true
	k.Columns = bindingColumns("roleBinding")
	k.Strategy = &typedStrategy[*rbacv1.RoleBinding]{
		namespaced:    true,
		name:          nameRBAC,
		newObj:        func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} },
		prepareCreate: defaultBinding,
		prepareUpdate: func(obj, _ *unstructured.Unstructured) { defaultBinding(obj) },
		validate: func(b *rbacv1.RoleBinding) field.ErrorList {
			return validateBinding(b.RoleRef, b.Subjects, true)
		},
		validateUpdate: func(b, old *rbacv1.RoleBinding) field.ErrorList { return validateRoleRefUpdate(b.RoleRef, old.RoleRef) },
	}
	return &k
}

func clusterRoleBindingKind() *Kind {
	k := kindBase(rbacv1.GroupName, "v1", "clusterrolebindings", "clusterrolebinding", func() *rbacv1.ClusterRoleBinding { return &rbacv1.ClusterRoleBinding{} }, func() *rbacv1.ClusterRoleBindingList { return &rbacv1.ClusterRoleBindingList{} })
	k.FullColumns = true
	k.Columns = bindingColumns("clusterRoleBinding")
	k.Strategy = &typedStrategy[*rbacv1.ClusterRoleBinding]{
		name:          nameRBAC,
		newObj:        func() *rbacv1.ClusterRoleBinding { return &rbacv1.ClusterRoleBinding{} },
		prepareCreate: defaultBinding,
		prepareUpdate: func(obj, _ *unstructured.Unstructured) { defaultBinding(obj) },
		validate: func(b *rbacv1.ClusterRoleBinding) field.ErrorList {
			return validateBinding(b.RoleRef, b.Subjects, false)
		},
		validateUpdate: func(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
			return validateRoleRefUpdate(b.RoleRef, old.RoleRef)
		},
	}
	return &k
}

func validateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}

func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range nameRBAC(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		fld := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(fld.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				for _, msg := range nameDNSSubdomain(s.Name, false) {
					errs = append(errs, field.Invalid(fld.Child("name"), s.Name, msg))
				}
			}
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(fld.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(fld.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(fld.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(fld.Child("kind"), s.Kind,
				[]string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
