package registry

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1) are evaluated
// by internal/admission/policy.

func validatingAdmissionPolicyKind() *Kind {
	k := kindBase(admissionregistrationv1.GroupName, "v1", "validatingadmissionpolicies", "validatingadmissionpolicy",
		func() *admissionregistrationv1.ValidatingAdmissionPolicy {
			return &admissionregistrationv1.ValidatingAdmissionPolicy{}
		},
		func() *admissionregistrationv1.ValidatingAdmissionPolicyList {
			return &admissionregistrationv1.ValidatingAdmissionPolicyList{}
		})
	k.Generation = true
	k.Status = true
	k.Categories = categoryAPIExtensions
	k.Columns = []Column{{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation expressions",
		Cell: func(obj *unstructured.Unstructured) any { return countAt(obj, "spec", "validations") }},
		{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy",
			Cell: func(obj *unstructured.Unstructured) any {
				if k, _, _ := unstructured.NestedString(obj.Object, "spec", "paramKind", "kind"); k != "" {
					av, _, _ := unstructured.NestedString(obj.Object, "spec", "paramKind", "apiVersion")
					return av + "/" + k
				}
				return "<unset>"
			}}}
	k.Strategy = &typedStrategy[*admissionregistrationv1.ValidatingAdmissionPolicy]{
		name: nameDNSSubdomain,
		newObj: func() *admissionregistrationv1.ValidatingAdmissionPolicy {
			return &admissionregistrationv1.ValidatingAdmissionPolicy{}
		},
		validate: validateAdmissionPolicy,
	}
	return &k
}

func countAt(obj *unstructured.Unstructured, path ...string) int64 {
	l, _, _ := unstructured.NestedSlice(obj.Object, path...)
	return int64(len(l))
}

// validateAdmissionPolicy keeps the policy evaluable; the CEL expressions are compiled (and
// their errors reported) when the policy is used.
func validateAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(spec.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i, v := range p.Spec.Validations {
		if v.Expression == "" {
			errs = append(errs, field.Required(spec.Child("validations").Index(i).Child("expression"), ""))
		}
	}
	if p.Spec.MatchConstraints == nil || len(p.Spec.MatchConstraints.ResourceRules) == 0 {
		errs = append(errs, field.Required(spec.Child("matchConstraints", "resourceRules"), ""))
	}
	if fp := p.Spec.FailurePolicy; fp != nil && *fp != admissionregistrationv1.Fail && *fp != admissionregistrationv1.Ignore {
		errs = append(errs, field.NotSupported(spec.Child("failurePolicy"), *fp, []string{"Fail", "Ignore"}))
	}
	if pk := p.Spec.ParamKind; pk != nil && (pk.Kind == "" || pk.APIVersion == "") {
		errs = append(errs, field.Required(spec.Child("paramKind"), "apiVersion and kind are required"))
	}
	return errs
}

func validatingAdmissionPolicyBindingKind() *Kind {
	k := kindBase(admissionregistrationv1.GroupName, "v1", "validatingadmissionpolicybindings", "validatingadmissionpolicybinding",
		func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		},
		func() *admissionregistrationv1.ValidatingAdmissionPolicyBindingList {
			return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
		})
	k.Generation = true
	k.Categories = categoryAPIExtensions
	k.Columns = []Column{{Name: "PolicyName", Type: "string", Description: "PolicyName references a ValidatingAdmissionPolicy name which the ValidatingAdmissionPolicyBinding binds to",
		Cell: func(obj *unstructured.Unstructured) any {
			s, _, _ := unstructured.NestedString(obj.Object, "spec", "policyName")
			return s
		}}}
	k.Strategy = &typedStrategy[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]{
		name: nameDNSSubdomain,
		newObj: func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		},
		validate: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
			var errs field.ErrorList
			spec := field.NewPath("spec")
			if b.Spec.PolicyName == "" {
				errs = append(errs, field.Required(spec.Child("policyName"), ""))
			}
			acts := b.Spec.ValidationActions
			if len(acts) == 0 {
				errs = append(errs, field.Required(spec.Child("validationActions"), "at least one validation action is required"))
			}
			seen := map[admissionregistrationv1.ValidationAction]bool{}
			for i, a := range acts {
				fp := spec.Child("validationActions").Index(i)
				switch a {
				case admissionregistrationv1.Deny, admissionregistrationv1.Warn, admissionregistrationv1.Audit:
				default:
					errs = append(errs, field.NotSupported(fp, a, []string{"Deny", "Warn", "Audit"}))
				}
				if seen[a] {
					errs = append(errs, field.Duplicate(fp, a))
				}
				seen[a] = true
			}
			if slices.Contains(acts, admissionregistrationv1.Deny) && slices.Contains(acts, admissionregistrationv1.Warn) {
				errs = append(errs, field.Invalid(spec.Child("validationActions"), acts, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
			}
			return errs
		},
	}
	return &k
}
