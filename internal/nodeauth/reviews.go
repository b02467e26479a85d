package nodeauth

import (
	"context"
	"errors"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationapi "k8s.io/kubernetes/pkg/apis/authorization"
	authorizationapiv1 "k8s.io/kubernetes/pkg/apis/authorization/v1"
	authorizationutil "k8s.io/kubernetes/pkg/registry/authorization/util"

	"kubeos.dev/kube/internal/apiserver/request"
)

// Hook is a computed kind's create hook (registry.Kind.Create), the shape of the RBAC
// access-review hooks.
type Hook = func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)

// Review wraps an access-review hook (SubjectAccessReview or LocalSubjectAccessReview,
// answered by RBAC) so that the review answers as the request
// path does with Union{Node, RBAC}: when next (RBAC) does not allow, the Node authorizer is
// asked the same question, with upstream's conversion of the review's spec to attributes
// (pkg/registry/authorization/util); if it allows, so does the review, and otherwise its
// reason is added to status.reason as the union reports it ("node: ...").
func (a *Authorizer) Review(next Hook) Hook { return a.review(next, false) }

// SelfReview is Review for SelfSubjectAccessReview: the question is asked for the
// requester's own identity.
func (a *Authorizer) SelfReview(next Hook) Hook { return a.review(next, true) }

func (a *Authorizer) review(next Hook, self bool) Hook {
	return func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		out, err := next(ctx, obj)
		if err != nil || out == nil {
			return out, err
		}
		if allowed, _, _ := unstructured.NestedBool(out.Object, "status", "allowed"); allowed {
			return out, nil
		}
		attrs, err := reviewAttributes(ctx, out, self)
		if err != nil {
			return nil, err
		}
		ok, reason := a.Decide(ctx, attrs)
		switch {
		case ok:
			if err := unstructured.SetNestedField(out.Object, true, "status", "allowed"); err != nil {
				return nil, err
			}
			unstructured.RemoveNestedField(out.Object, "status", "reason")
			if reason != "" {
				_ = unstructured.SetNestedField(out.Object, reason, "status", "reason")
			}
		case reason != "":
			prev, _, _ := unstructured.NestedString(out.Object, "status", "reason")
			reason = Name + ": " + reason
			if prev != "" {
				reason = reason + "\n" + prev
			}
			if err := unstructured.SetNestedField(out.Object, reason, "status", "reason"); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// reviewAttributes is the question a review asks, for the user it names (the requester's
// own identity for SelfSubjectAccessReview).
func reviewAttributes(ctx context.Context, review *unstructured.Unstructured, self bool) (authorizer.AttributesRecord, error) {
	spec, _, _ := unstructured.NestedMap(review.Object, "spec")
	var v1spec authorizationv1.SubjectAccessReviewSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &v1spec); err != nil {
		return authorizer.AttributesRecord{}, apierrors.NewBadRequest(err.Error())
	}
	var in authorizationapi.SubjectAccessReviewSpec
	if err := authorizationapiv1.Convert_v1_SubjectAccessReviewSpec_To_authorization_SubjectAccessReviewSpec(&v1spec, &in, nil); err != nil {
		return authorizer.AttributesRecord{}, apierrors.NewBadRequest(err.Error())
	}
	if !self {
		return authorizationutil.AuthorizationAttributesFrom(in), nil
	}
	u, ok := request.UserFrom(ctx)
	if !ok || u == nil {
		return authorizer.AttributesRecord{}, apierrors.NewInternalError(errors.New("no user in request context"))
	}
	info := &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	switch {
	case in.ResourceAttributes != nil:
		return authorizationutil.ResourceAttributesFrom(info, *in.ResourceAttributes), nil
	case in.NonResourceAttributes != nil:
		return authorizationutil.NonResourceAttributesFrom(info, *in.NonResourceAttributes), nil
	}
	return authorizer.AttributesRecord{}, apierrors.NewBadRequest("SelfSubjectAccessReview without resourceAttributes or nonResourceAttributes")
}

// SelfRulesReview wraps the SelfSubjectRulesReview hook (RBAC's rules) as upstream's
// rule-resolver union answers for a node: the Node authorizer cannot enumerate what a node
// may do, so the review is incomplete and carries its evaluation error.
func (a *Authorizer) SelfRulesReview(next Hook) Hook {
	return func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		out, err := next(ctx, obj)
		if err != nil || out == nil {
			return out, err
		}
		u, ok := request.UserFrom(ctx)
		if !ok || u == nil {
			return out, nil
		}
		ns, _, _ := unstructured.NestedString(out.Object, "spec", "namespace")
		info := &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
		_, _, incomplete, rerr := a.authz.RulesFor(ctx, info, ns)
		if !incomplete && rerr == nil {
			return out, nil
		}
		if err := unstructured.SetNestedField(out.Object, true, "status", "incomplete"); err != nil {
			return nil, err
		}
		if rerr != nil {
			msg := rerr.Error()
			if prev, _, _ := unstructured.NestedString(out.Object, "status", "evaluationError"); prev != "" {
				msg = prev + ", " + msg
			}
			if err := unstructured.SetNestedField(out.Object, msg, "status", "evaluationError"); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}
