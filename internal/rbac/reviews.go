package rbac

import (
	"context"
	"errors"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
)

// The access reviews are computed kinds (registry.Kind.Create): they answer from the
// snapshot and store nothing.

func fromU(obj *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

func toU(v any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func userOf(ctx context.Context) (*request.User, error) {
	u, ok := request.UserFrom(ctx)
	if !ok || u == nil {
		return nil, apierrors.NewInternalError(errors.New("no user in request context"))
	}
	return u, nil
}

// decide answers one access question for u, letting system:masters through.
func (a *Authorizer) decide(u *request.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) bool {
	if slices.Contains(u.Groups, filters.MastersGroup) {
		return true
	}
	attrs := Attributes{User: u.Name, Groups: u.Groups}
	if ra != nil {
		attrs.ResourceRequest = true
		attrs.Verb, attrs.APIGroup, attrs.Resource, attrs.Subresource = ra.Verb, ra.Group, ra.Resource, ra.Subresource
		attrs.Namespace, attrs.Name = ra.Namespace, ra.Name
	} else if nra != nil {
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	return a.Snapshot().Allows(&attrs)
}

func validateAttributes(kind string, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) error {
	fld := field.NewPath("spec")
	var errs field.ErrorList
	switch {
	case ra == nil && nra == nil:
		errs = append(errs, field.Required(fld.Child("resourceAttributes"), "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	case ra != nil && nra != nil:
		errs = append(errs, field.Invalid(fld.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: kind}, "", errs)
	}
	return nil
}

// reason is what upstream's RBAC authorizer says when it allows.
func reasonFor(allowed bool) string {
	if allowed {
		return "RBAC: allowed"
	}
	return ""
}

// CreateSelfSubjectAccessReview answers "may I ...?" (kubectl auth can-i).
func (a *Authorizer) CreateSelfSubjectAccessReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u, err := userOf(ctx)
	if err != nil {
		return nil, err
	}
	var r authorizationv1.SelfSubjectAccessReview
	if err := fromU(obj, &r); err != nil {
		return nil, err
	}
	if err := validateAttributes("SelfSubjectAccessReview", r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes); err != nil {
		return nil, err
	}
	allowed := a.decide(u, r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
	r.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Reason: reasonFor(allowed)}
	return toU(&r)
}

// CreateSubjectAccessReview answers "may user ...?" for any user.
func (a *Authorizer) CreateSubjectAccessReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var r authorizationv1.SubjectAccessReview
	if err := fromU(obj, &r); err != nil {
		return nil, err
	}
	if err := a.subjectReview("SubjectAccessReview", &r.Spec, &r.Status, ""); err != nil {
		return nil, err
	}
	return toU(&r)
}

// CreateLocalSubjectAccessReview is SubjectAccessReview limited to the request's namespace.
func (a *Authorizer) CreateLocalSubjectAccessReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var r authorizationv1.LocalSubjectAccessReview
	if err := fromU(obj, &r); err != nil {
		return nil, err
	}
	if err := a.subjectReview("LocalSubjectAccessReview", &r.Spec, &r.Status, r.Namespace); err != nil {
		return nil, err
	}
	return toU(&r)
}

func (a *Authorizer) subjectReview(kind string, spec *authorizationv1.SubjectAccessReviewSpec, status *authorizationv1.SubjectAccessReviewStatus, namespace string) error {
	if err := validateAttributes(kind, spec.ResourceAttributes, spec.NonResourceAttributes); err != nil {
		return err
	}
	gk := schema.GroupKind{Group: authorizationv1.GroupName, Kind: kind}
	if spec.User == "" && len(spec.Groups) == 0 {
		return apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified")})
	}
	if namespace != "" {
		if spec.ResourceAttributes == nil || spec.ResourceAttributes.Namespace != namespace {
			return apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), "", "must match metadata.namespace")})
		}
	}
	u := &request.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	allowed := a.decide(u, spec.ResourceAttributes, spec.NonResourceAttributes)
	*status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Reason: reasonFor(allowed)}
	return nil
}

// CreateSelfSubjectRulesReview lists what the user may do in a namespace (kubectl auth
// can-i --list).
func (a *Authorizer) CreateSelfSubjectRulesReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u, err := userOf(ctx)
	if err != nil {
		return nil, err
	}
	var r authorizationv1.SelfSubjectRulesReview
	if err := fromU(obj, &r); err != nil {
		return nil, err
	}
	if r.Spec.Namespace == "" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: "SelfSubjectRulesReview"}, "",
			field.ErrorList{field.Required(field.NewPath("spec", "namespace"), "")})
	}
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, rule := range a.Snapshot().RulesFor(u.Name, u.Groups, r.Spec.Namespace) {
		if len(rule.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames})
	}
	r.Status = st
	return toU(&r)
}

// CreateSelfSubjectReview tells the user who the server thinks they are (kubectl auth
// whoami). It lives here with the other self reviews.
func CreateSelfSubjectReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u, err := userOf(ctx)
	if err != nil {
		return nil, err
	}
	var r authenticationv1.SelfSubjectReview
	if err := fromU(obj, &r); err != nil {
		return nil, err
	}
	r.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		r.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range u.Extra {
			r.Status.UserInfo.Extra[k] = v
		}
	}
	return toU(&r)
}
