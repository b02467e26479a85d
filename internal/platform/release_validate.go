package platform

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func init() { kindValidators["Release"] = validateRelease }

// validateRelease refuses a Canary without steps, a step with both or neither of setWeight
// and pause, weights outside 0..100 or decreasing, and a second Release of one Component.
func validateRelease(ctx context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	var rel v1alpha1.Release
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &rel); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	errs := ValidateReleaseSpec(&rel.Spec)
	info := AdmissionContext(ctx)
	if info.Reader != nil && rel.Spec.Component != "" {
		var list v1alpha1.ReleaseList
		if err := info.Reader.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
			errs = append(errs, field.InternalError(field.NewPath("spec", "component"), err))
		}
		for _, o := range list.Items {
			if o.Namespace == obj.GetNamespace() && o.Name != obj.GetName() && o.Spec.Component == rel.Spec.Component {
				errs = append(errs, field.Duplicate(field.NewPath("spec", "component"),
					fmt.Sprintf("%s (Release %s ships it already: one Release per Component)", rel.Spec.Component, o.Name)))
			}
		}
	}
	return errs
}

// ValidateReleaseSpec checks a Release's strategy.
func ValidateReleaseSpec(s *v1alpha1.ReleaseSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "strategy")
	if s.Component == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "component"), ""))
	}
	for i, e := range s.Env {
		if _, err := parseComponentPlaceholders(e.Value); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "env").Index(i).Child("value"), e.Value, err.Error()))
		}
	}
	switch s.Strategy.Type {
	case "", v1alpha1.ReleaseRolling, v1alpha1.ReleaseRecreate:
		if len(s.Strategy.Steps) > 0 {
			errs = append(errs, field.Forbidden(p.Child("steps"), "steps are for strategy Canary"))
		}
		if s.Strategy.Analysis != nil {
			errs = append(errs, field.Forbidden(p.Child("analysis"), "analysis is for strategy Canary"))
		}
	case v1alpha1.ReleaseCanary:
		if len(s.Strategy.Steps) == 0 {
			errs = append(errs, field.Required(p.Child("steps"), "a Canary needs steps"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Strategy.Type, []string{v1alpha1.ReleaseRolling, v1alpha1.ReleaseRecreate, v1alpha1.ReleaseCanary}))
	}
	last := int32(-1)
	for i, st := range s.Strategy.Steps {
		sp := p.Child("steps").Index(i)
		switch {
		case st.SetWeight != nil && st.Pause != nil:
			errs = append(errs, field.Invalid(sp, "setWeight and pause", "a step sets a weight or pauses, not both"))
		case st.SetWeight == nil && st.Pause == nil:
			errs = append(errs, field.Required(sp, "a step sets a weight or pauses"))
		case st.SetWeight != nil:
			w := *st.SetWeight
			if w < 0 || w > 100 {
				errs = append(errs, field.Invalid(sp.Child("setWeight"), w, "must be between 0 and 100"))
			} else if w < last {
				errs = append(errs, field.Invalid(sp.Child("setWeight"), w, fmt.Sprintf("weights must not decrease (the step before sets %d)", last)))
			}
			last = max(last, w)
		case st.Pause.Duration != nil && st.Pause.Duration.Duration <= 0:
			errs = append(errs, field.Invalid(sp.Child("pause", "duration"), st.Pause.Duration.Duration.String(), "must be positive (omit it to pause until promoted)"))
		}
	}
	if a := s.Strategy.Analysis; a != nil {
		if len(a.Alerts) == 0 {
			errs = append(errs, field.Required(p.Child("analysis", "alerts"), "name the Alerts that must not fire"))
		}
		if a.Duration != nil && a.Duration.Duration <= 0 {
			errs = append(errs, field.Invalid(p.Child("analysis", "duration"), a.Duration.Duration.String(), "must be positive"))
		}
	}
	return errs
}
