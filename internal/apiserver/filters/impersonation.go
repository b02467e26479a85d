package filters

import (
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
)

// Impersonation headers, as upstream (k8s.io/api/authentication/v1).
const (
	ImpersonateUserHeader        = "Impersonate-User"
	ImpersonateUIDHeader         = "Impersonate-Uid"
	ImpersonateGroupHeader       = "Impersonate-Group"
	ImpersonateUserExtraPrefix   = "Impersonate-Extra-"
	serviceAccountUserPrefix     = "system:serviceaccount:"
	allServiceAccountsGroup      = "system:serviceaccounts"
	impersonateVerb              = "impersonate"
	authenticationGroup          = "authentication.k8s.io"
	authenticatedGroup           = "system:authenticated"
	anonymousUser                = "system:anonymous"
	impersonatedUserInfoResource = "userextras"
)

// withImpersonation acts as the user named by the Impersonate-* headers when the
// authenticated user may impersonate them (verb impersonate on users, groups, uids,
// serviceaccounts and userextras/<key>), as kube-apiserver's WithImpersonation.
func withImpersonation(h http.Handler, a Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get(ImpersonateUserHeader)
		groups := r.Header.Values(ImpersonateGroupHeader)
		uid := r.Header.Get(ImpersonateUIDHeader)
		extra := map[string][]string{}
		for k, vs := range r.Header {
			if strings.HasPrefix(k, ImpersonateUserExtraPrefix) {
				key := strings.ToLower(strings.TrimPrefix(k, ImpersonateUserExtraPrefix))
				if unescaped, err := url.PathUnescape(key); err == nil {
					key = unescaped
				}
				extra[key] = append(extra[key], vs...)
			}
		}
		if name == "" {
			if len(groups) > 0 || uid != "" || len(extra) > 0 {
				rest.WriteStatus(w, apierrors.NewBadRequest("requested impersonation of groups, uid or extra without impersonating a user"))
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		u, _ := request.UserFrom(r.Context())
		check := func(info *request.Info) bool {
			info.IsResourceRequest, info.Verb = true, impersonateVerb
			if ok, reason := Allowed(r.Context(), a, u, info); !ok {
				rest.WriteStatus(w, Forbidden(u, info, reason))
				return false
			}
			return true
		}
		as := &request.User{Name: name, UID: uid}
		if ns, sa, ok := strings.Cut(strings.TrimPrefix(name, serviceAccountUserPrefix), ":"); strings.HasPrefix(name, serviceAccountUserPrefix) && ok {
			if !check(&request.Info{Resource: "serviceaccounts", Namespace: ns, Name: sa}) {
				return
			}
			as.Groups = append(as.Groups, allServiceAccountsGroup, allServiceAccountsGroup+":"+ns)
		} else if !check(&request.Info{Resource: "users", Name: name}) {
			return
		}
		for _, g := range groups {
			if !check(&request.Info{Resource: "groups", Name: g}) {
				return
			}
			as.Groups = append(as.Groups, g)
		}
		if uid != "" && !check(&request.Info{APIGroup: authenticationGroup, Resource: "uids", Name: uid}) {
			return
		}
		for k, vs := range extra {
			for _, v := range vs {
				if !check(&request.Info{APIGroup: authenticationGroup, Resource: impersonatedUserInfoResource, Subresource: k, Name: v}) {
					return
				}
			}
		}
		if len(extra) > 0 {
			as.Extra = extra
		}
		if name != anonymousUser {
			as.Groups = withAuthenticated(as.Groups)
		} else {
			as.Groups = append(as.Groups, "system:unauthenticated")
		}
		ctx := request.WithUser(r.Context(), as)
		if info, ok := request.InfoFrom(ctx); ok && info != nil {
			via := *info
			via.Impersonator = u.Name
			ctx = request.WithInfo(ctx, &via)
		}
		r = r.WithContext(ctx)
		for k := range r.Header {
			if k == ImpersonateUserHeader || k == ImpersonateGroupHeader || k == ImpersonateUIDHeader || strings.HasPrefix(k, ImpersonateUserExtraPrefix) {
				r.Header.Del(k)
			}
		}
		h.ServeHTTP(w, r)
	})
}
