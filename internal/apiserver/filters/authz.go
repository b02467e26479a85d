package filters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
)

// Authorizer decides whether user may do what info describes. reason, when not empty, is
// appended to the 403 message.
type Authorizer interface {
	Authorize(ctx context.Context, u *request.User, info *request.Info) (allowed bool, reason string)
}

// MastersGroup is always allowed, as upstream's privileged group.
const MastersGroup = "system:masters"

// Allowed asks a after letting system:masters through.
func Allowed(ctx context.Context, a Authorizer, u *request.User, info *request.Info) (bool, string) {
	if slices.Contains(u.Groups, MastersGroup) {
		return true, ""
	}
	return a.Authorize(ctx, u, info)
}

func withAuthorization(h http.Handler, a Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := request.InfoFrom(r.Context())
		u, _ := request.UserFrom(r.Context())
		if info == nil || u == nil {
			rest.WriteStatus(w, apierrors.NewInternalError(errors.New("no request info or user")))
			return
		}
		if !info.IsResourceRequest && anonymousAllowed(r.URL.Path) {
			// Health and version are open to everyone, as upstream's
			// system:public-info-viewer binding makes them.
			h.ServeHTTP(w, r)
			return
		}
		if ok, reason := Allowed(r.Context(), a, u, info); !ok {
			rest.WriteStatus(w, Forbidden(u, info, reason))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Forbidden is the 403 kube-apiserver answers for a denied request:
//
//	configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "default"
//	configmaps "x" is forbidden: User ... at the cluster scope
//	forbidden: User "alice" cannot get path "/metrics"
func Forbidden(u *request.User, info *request.Info, reason string) *apierrors.StatusError {
	var msg string
	var gr schema.GroupResource
	if !info.IsResourceRequest {
		msg = fmt.Sprintf("User %q cannot %s path %q", u.Name, info.Verb, info.Path)
	} else {
		resource := info.Resource
		if info.Subresource != "" {
			resource += "/" + info.Subresource
		}
		gr = schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
		if info.Namespace != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", u.Name, info.Verb, resource, info.APIGroup, info.Namespace)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", u.Name, info.Verb, resource, info.APIGroup)
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(gr, info.Name, errors.New(msg))
}
