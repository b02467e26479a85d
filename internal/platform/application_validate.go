package platform

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func init() { kindValidators["Application"] = validateApplication }

// validateApplication refuses component names that are not Component names (a DNS
// subdomain: a name of another namespace, "ns/name", cannot be written), duplicates and a
// bad selector.
func validateApplication(_ context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	var app v1alpha1.Application
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &app); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	return ValidateApplicationSpec(&app.Spec)
}

// ValidateApplicationSpec checks an Application's members.
func ValidateApplicationSpec(s *v1alpha1.ApplicationSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "components")
	seen := map[string]bool{}
	for i, n := range s.Components {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(p.Index(i), n, "not a Component name (Components of the Application's namespace only): "+msg))
		}
		if seen[n] {
			errs = append(errs, field.Duplicate(p.Index(i), n))
		}
		seen[n] = true
	}
	if s.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.Selector); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), s.Selector, err.Error()))
		}
	}
	for k, v := range s.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "labels").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "labels").Key(k), v, msg))
		}
	}
	return errs
}
