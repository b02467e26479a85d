package builtin

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
)

// sarAuthorizer answers the plugins' authorization questions (NodeRestriction asks whether a
// node may request a token for an audience) with a SubjectAccessReview to the server
// itself, so they get exactly the server's own decision.
type sarAuthorizer struct{ client kubernetes.Interface }

var _ authorizer.Authorizer = (*sarAuthorizer)(nil)

func (z *sarAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	sar := &authorizationv1.SubjectAccessReview{}
	if u := a.GetUser(); u != nil {
		sar.Spec.User, sar.Spec.UID, sar.Spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
			for k, v := range extra {
				sar.Spec.Extra[k] = v
			}
		}
	}
	if a.IsResourceRequest() {
		sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
			Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName(),
		}
	} else {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	out, err := z.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	switch {
	case out.Status.Allowed:
		return authorizer.DecisionAllow, out.Status.Reason, nil
	case out.Status.Denied:
		return authorizer.DecisionDeny, out.Status.Reason, nil
	}
	return authorizer.DecisionNoOpinion, out.Status.Reason, nil
}

func (z *sarAuthorizer) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(z.Authorize(ctx, a))
}

func (z *sarAuthorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}
