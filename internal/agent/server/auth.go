package server

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
)

// The kubelet's defaults for its webhook authentication and authorization caches
// (KubeletConfiguration authentication.webhook.cacheTTL, authorization.webhook.
// cacheAuthorizedTTL and cacheUnauthorizedTTL).
const (
	tokenCacheTTL = 2 * time.Minute
	allowCacheTTL = 5 * time.Minute
	denyCacheTTL  = 30 * time.Second
)

// auth is the kubelet's authentication and authorization of its API, built from
// k8s.io/apiserver's delegating pieces as the kubelet builds them (cmd/kubelet/app/auth.go):
// client certificates signed by the client CA, or bearer tokens checked by TokenReview
// (answers cached tokenCacheTTL); no anonymous user; decisions by SubjectAccessReview
// (allowed cached allowCacheTTL, denied denyCacheTTL).
type auth struct {
	node  string
	authn authenticator.Request
	authz authorizer.Authorizer
}

func newAuth(node string, clientCA *x509.CertPool, client kubernetes.Interface) (*auth, error) {
	if client == nil {
		return nil, errors.New("agent server: no API client for TokenReviews and SubjectAccessReviews")
	}
	ac := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:               &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                tokenCacheTTL,
		TokenAccessReviewClient: client.AuthenticationV1(),
		WebhookRetryBackoff:     genericoptions.DefaultAuthWebhookRetryBackoff(),
	}
	if clientCA != nil {
		ac.ClientCertificateCAContentProvider = poolCA{clientCA}
	}
	authn, _, err := ac.New()
	if err != nil {
		return nil, fmt.Errorf("agent server: authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             allowCacheTTL,
		DenyCacheTTL:              denyCacheTTL,
		WebhookRetryBackoff:       genericoptions.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("agent server: authorization: %w", err)
	}
	return &auth{node: node, authn: authn, authz: authz}, nil
}

// filter authenticates and authorises every request but GET /healthz, answering as the
// kubelet's auth filter does (server.go InstallAuthFilter) with its messages in a
// metav1.Status: 401 for no or bad credentials, 403 naming the user, verb, resource and
// subresources when no subresource is allowed, 500 when a review could not be made.
func (a *auth) filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		resp, ok, err := a.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized", nil)
			return
		}
		attrs := Attributes(a.node, resp.User, r.Method, r.URL.Path)
		var subresources []string
		for _, attr := range attrs {
			subresources = append(subresources, attr.GetSubresource())
			decision, _, err := a.authz.Authorize(r.Context(), attr)
			if err != nil {
				writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError,
					fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)", attr.GetUser().GetName(), attr.GetVerb(), attr.GetResource(), attr.GetSubresource()), nil)
				return
			}
			if decision == authorizer.DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
		}
		first := attrs[0]
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)", first.GetUser().GetName(), first.GetVerb(), first.GetResource(), subresources),
			&metav1.StatusDetails{Name: a.node, Kind: "nodes"})
	})
}

// Attributes are the authorization attributes of a request to the agent's API, the
// kubelet's mapping (pkg/kubelet/server/auth.go GetRequestAttributes, with
// KubeletFineGrainedAuthz, GA and locked on since 1.36): resource nodes, name node, verb
// from the HTTP method (POST create, GET get, PUT update, PATCH patch, DELETE delete, any
// other none), and one attribute per subresource to try in order — pods then proxy for
// /pods, /allocatedPods and /runningpods/, healthz then proxy for /healthz/..., configz
// then proxy for /configz; stats for /stats/..., metrics for /metrics/..., log for
// /logs/..., checkpoint for /checkpoint/..., statusz for /statusz, configz for /flagz,
// proxy for everything else. The request is allowed when any one is. Pure.
//
// k8s.io/kubernetes/pkg/kubelet/server is not imported for it: it would bring modules
// go.mod does not have (go-restful's OpenTelemetry instrumentation).
func Attributes(node string, u user.Info, method, path string) []authorizer.Attributes {
	verb := map[string]string{http.MethodPost: "create", http.MethodGet: "get", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete"}[method]
	var subresources []string
	switch {
	case isSubpath(path, "/allocatedPods"), isSubpath(path, "/pods"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	case isSubpath(path, "/runningpods/"):
		subresources = append(subresources, "pods")
	}
	switch {
	case isSubpath(path, "/stats/"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs/"):
		subresources = append(subresources, "log")
	case isSubpath(path, "/checkpoint/"):
		subresources = append(subresources, "checkpoint")
	case isSubpath(path, "/statusz"):
		subresources = append(subresources, "statusz")
	case isSubpath(path, "/flagz"):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]authorizer.Attributes, len(subresources))
	for i, sub := range subresources {
		attrs[i] = authorizer.AttributesRecord{User: u, Verb: verb, APIVersion: "v1", Resource: "nodes",
			Subresource: sub, Name: node, ResourceRequest: true, Path: path}
	}
	return attrs
}

// isSubpath reports whether subpath is path or below it (the kubelet's). Pure.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && subpath[len(path)] == '/')
}

// writeStatus answers a failure as a metav1.Status.
func writeStatus(w http.ResponseWriter, code int32, reason metav1.StatusReason, msg string, details *metav1.StatusDetails) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Details: details, Code: code}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(code))
	_ = json.NewEncoder(w).Encode(&st)
}

// poolCA gives the client CA pool to k8s.io/apiserver's x509 authenticator (a
// dynamiccertificates.CAContentProvider that never changes: a rotating agent's pool is
// fixed at start, from --certificate-authority).
type poolCA struct{ pool *x509.CertPool }

func (poolCA) Name() string                             { return "agent-client-ca" }
func (poolCA) CurrentCABundleContent() []byte           { return nil }
func (poolCA) AddListener(dynamiccertificates.Listener) {}
func (c poolCA) VerifyOptions() (x509.VerifyOptions, bool) {
	return x509.VerifyOptions{Roots: c.pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, true
}
