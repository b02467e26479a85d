package registry

import (
	"reflect"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Computed (never stored) kinds of authentication.k8s.io and authorization.k8s.io. Their
// Create hooks are set by the server, which owns the authenticators and the authorizer;
// until then a create answers 405.

// Resources of the computed kinds.
const (
	SelfSubjectAccessReviews  = "selfsubjectaccessreviews"
	SubjectAccessReviews      = "subjectaccessreviews"
	LocalSubjectAccessReviews = "localsubjectaccessreviews"
	SelfSubjectRulesReviews   = "selfsubjectrulesreviews"
	SelfSubjectReviews        = "selfsubjectreviews"
	TokenReviews              = "tokenreviews"
)

// createOnly are the verbs of computed kinds.
var createOnly = []string{"create"}

func computedKind[T runtime.Object](group, resource string, namespaced bool, newObj func() T) *Kind {
	return computedKindV(group, "v1", resource, namespaced, newObj)
}

func computedKindV[T runtime.Object](group, version, resource string, namespaced bool, newObj func() T) *Kind {
	t := indirectType(reflect.TypeOf(newObj()))
	return &Kind{
		Group: group, Version: version, Kind: t.Name(),
		Resource: resource, Singular: strings.TrimSuffix(resource, "s"), Namespaced: namespaced,
		Verbs:      createOnly,
		NewTyped:   func() runtime.Object { return newObj() },
		SchemaName: typeName(t),
		SchemaFunc: func() *spec.Schema {
			s := Definitions()[typeName(t)]
			return &s
		},
	}
}

func authzKinds() []*Kind {
	return []*Kind{
		computedKind(authorizationv1.GroupName, SelfSubjectAccessReviews, false, func() *authorizationv1.SelfSubjectAccessReview { return &authorizationv1.SelfSubjectAccessReview{} }),
		computedKind(authorizationv1.GroupName, SubjectAccessReviews, false, func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} }),
		computedKind(authorizationv1.GroupName, LocalSubjectAccessReviews, true, func() *authorizationv1.LocalSubjectAccessReview { return &authorizationv1.LocalSubjectAccessReview{} }),
		computedKind(authorizationv1.GroupName, SelfSubjectRulesReviews, false, func() *authorizationv1.SelfSubjectRulesReview { return &authorizationv1.SelfSubjectRulesReview{} }),
		computedKind(authenticationv1.GroupName, SelfSubjectReviews, false, func() *authenticationv1.SelfSubjectReview { return &authenticationv1.SelfSubjectReview{} }),
		computedKind(authenticationv1.GroupName, TokenReviews, false, func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} }),
		// kubectl 1.27's auth whoami asks v1alpha1 or v1beta1 (v1 is GA since 1.28); v1beta1
		// has the same fields.
		computedKindV(authenticationv1beta1.GroupName, "v1beta1", SelfSubjectReviews, false, func() *authenticationv1beta1.SelfSubjectReview { return &authenticationv1beta1.SelfSubjectReview{} }),
	}
}
