package filters

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"

	"kubeos.dev/kube/internal/apiserver/request"
)

// TokenSuccessCacheTTL is how long a successful bearer-token authentication is remembered:
// kube-apiserver's BuiltInAuthenticationOptions.TokenSuccessCacheTTL (no flag sets it).
// Failures are not remembered (its TokenFailureCacheTTL is 0).
const TokenSuccessCacheTTL = 10 * time.Second

// CachedTokens authenticates bearer tokens with a union of token authenticators behind
// k8s.io/apiserver's token cache, wired as kube-apiserver wires them
// (pkg/kubeapiserver/authenticator.Config.New): every token authenticator in one union, the
// union behind one cache, successes kept for the success TTL, errors and unknown tokens never
// kept. The cache key is an HMAC (random key per process) of the token and the audiences it
// was checked for, so one token never answers as another, and a token accepted for the API's
// audiences is checked again for any other audiences a TokenReview asks about. The request
// path and TokenReview share it (as upstream's TokenReview calls the request authenticator),
// so both give the same answer for the same token.
//
// What a user sees, as with kube-apiserver: a token that was accepted keeps being accepted
// for up to the success TTL (10 s) without being checked again, so the token of a
// ServiceAccount that was just deleted or re-created, of a bootstrap token Secret that was
// just removed, or a token that just expired, still works for up to 10 s. A refused token is
// checked again on every request, so a token refused because, say, its bootstrap Secret was
// not there yet works as soon as the server sees the Secret.
type CachedTokens struct {
	cached       authenticator.Token
	apiAudiences authenticator.Audiences
}

var _ TokenAuthenticator = (*CachedTokens)(nil)

// NewCachedTokens caches auth's successes for successTTL (0 disables the cache). A request
// is authenticated for apiAudiences (kube-apiserver's --api-audiences, by default its
// service-account issuer), and so is a TokenReview that names no audiences.
func NewCachedTokens(auth authenticator.Token, apiAudiences []string, successTTL time.Duration) *CachedTokens {
	if successTTL > 0 {
		auth = tokencache.New(auth, true, successTTL, 0)
	}
	return &CachedTokens{cached: auth, apiAudiences: slices.Clone(apiAudiences)}
}

// AuthenticateToken implements TokenAuthenticator for the request path: the token must be
// for the API's audiences.
func (c *CachedTokens) AuthenticateToken(ctx context.Context, token string) (*request.User, bool, error) {
	u, _, ok, err := c.Review(ctx, token, nil)
	return u, ok, err
}

// Review authenticates token for audiences (none: the API's audiences) as a TokenReview
// does, and returns the audiences the token was accepted for. ok is false and err nil for a
// token no authenticator knows.
func (c *CachedTokens) Review(ctx context.Context, token string, audiences []string) (u *request.User, accepted []string, ok bool, err error) {
	auds := authenticator.Audiences(audiences)
	if len(auds) == 0 {
		auds = c.apiAudiences
	}
	if len(auds) > 0 {
		ctx = authenticator.WithAudiences(ctx, auds)
	}
	resp, ok, err := c.cached.AuthenticateToken(ctx, token)
	if err != nil || !ok || resp == nil || resp.User == nil {
		return nil, nil, false, err
	}
	// The cached response is shared by every request with this token: hand out copies.
	info := resp.User
	return &request.User{Name: info.GetName(), UID: info.GetUID(), Groups: authenticatedGroups(info), Extra: cloneExtra(info.GetExtra())},
		slices.Clone([]string(resp.Audiences)), true, nil
}

// authenticatedGroups is a copy of the user's groups with system:authenticated added, as
// kube-apiserver's AuthenticatedGroupAdder adds it to every authenticated request (and
// TokenReview) unless the user is anonymous or already in system:authenticated or
// system:unauthenticated. Bootstrap tokens rely on it: their authenticator answers
// system:bootstrappers only.
func authenticatedGroups(info user.Info) []string {
	groups := info.GetGroups()
	if info.GetName() == user.Anonymous || slices.Contains(groups, user.AllAuthenticated) || slices.Contains(groups, user.AllUnauthenticated) {
		return slices.Clone(groups)
	}
	return append(slices.Clone(groups), user.AllAuthenticated)
}

func cloneExtra(extra map[string][]string) map[string][]string {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string][]string, len(extra))
	for k, v := range extra {
		out[k] = slices.Clone(v)
	}
	return out
}

// UpstreamToken presents a Kube TokenAuthenticator as k8s.io/apiserver's
// authenticator.Token, for the union behind the cache. The user it returns is not kept by
// a.
func UpstreamToken(a TokenAuthenticator) authenticator.Token {
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		u, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil || !ok {
			return nil, false, err
		}
		if u == nil {
			return nil, false, fmt.Errorf("%w: authenticator returned no user", ErrInvalidCredentials)
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}}, true, nil
	})
}
