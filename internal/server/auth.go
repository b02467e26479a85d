package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/plugin/pkg/auth/authenticator/token/bootstrap"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/nodeauth"
	"kubeos.dev/kube/internal/rbac"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/serviceaccount"
)

// authState is the server's authentication and authorization: the authenticators, the RBAC
// authorizer, escalation prevention, service-account tokens.
type authState struct {
	authz      *rbac.Authorizer
	escalation *rbac.Escalation
	tokens     *serviceaccount.Tokens
	static     *filters.StaticTokens
	client     kubernetes.Interface
	// node is the Node authorizer, asked before RBAC (authorizer).
	node *nodeauth.Authorizer
	// bootstrap authenticates bootstrap tokens (kube-system Secrets of type
	// bootstrap.kubernetes.io/token) with upstream's authenticator, once startAuth has
	// started its Secret informer.
	bootstrap bootstrapTokens
	// bearer is every bearer-token authenticator behind the token cache; requests and
	// TokenReview both authenticate through it (bearerTokens).
	bearer *filters.CachedTokens
}

// bootstrapTokens is upstream's bootstrap token authenticator; it knows no token until its
// lister is set.
type bootstrapTokens struct {
	auth atomic.Pointer[bootstrap.TokenAuthenticator]
}

// AuthenticateToken implements authenticator.Token.
func (b *bootstrapTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	a := b.auth.Load()
	if a == nil {
		return nil, false, nil
	}
	return a.AuthenticateToken(ctx, token)
}

// serviceAccountTokens validates Kube's service-account tokens for the audiences in the
// context (authenticator.WithAudiences; none: the issuer), as upstream's service-account
// authenticator, and answers the audiences the token was accepted for.
type serviceAccountTokens struct{ tokens *serviceaccount.Tokens }

// AuthenticateToken implements authenticator.Token.
func (s serviceAccountTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	auds, _ := authenticator.AudiencesFrom(ctx)
	u, matched, ok, err := s.tokens.Validate(ctx, token, nilIfEmpty(auds))
	if err != nil || !ok {
		return nil, false, err
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}, Audiences: matched}, true, nil
}

// bearerTokens is kube-apiserver's bearer-token authentication (Config.New in
// pkg/kubeapiserver/authenticator): the static tokens of --token-auth-file, service-account
// tokens and bootstrap tokens, in that order, in one union behind k8s.io/apiserver's token
// cache (successes for filters.TokenSuccessCacheTTL, failures not kept). The API's audience
// is the service-account issuer (kube-apiserver's --api-audiences default); static and
// bootstrap tokens know no audiences and are accepted only for it.
func (sec *authState) bearerTokens() *filters.CachedTokens {
	apiAudiences := authenticator.Audiences{sec.tokens.Issuer()}
	var union []authenticator.Token
	if sec.static != nil {
		union = append(union, authenticator.WrapAudienceAgnosticToken(apiAudiences, filters.UpstreamToken(sec.static)))
	}
	union = append(union, serviceAccountTokens{sec.tokens}, authenticator.WrapAudienceAgnosticToken(apiAudiences, &sec.bootstrap))
	return filters.NewCachedTokens(tokenunion.New(union...), apiAudiences, filters.TokenSuccessCacheTTL)
}

// newAuth prepares authentication and authorization and gives the computed kinds
// (access reviews, SelfSubjectReview, TokenReview) and serviceaccounts/token their hooks.
// Called by New once the PKI and the registry exist.
func (s *Server) newAuth() error {
	var err error
	cs := s.apiserverClient
	sec := &authState{authz: rbac.NewAuthorizer(), client: cs}
	sec.escalation = &rbac.Escalation{Authorizer: sec.authz}
	sec.node = nodeauth.New(s.opts.Log.With("component", "node-authorizer"))
	if sec.tokens, err = serviceaccount.New(s.pki.ServiceAccountKey, s.opts.ServiceAccountIssuer, cs, nil); err != nil {
		return err
	}
	if s.opts.TokenAuthFile != "" {
		if sec.static, err = filters.LoadTokenFile(s.opts.TokenAuthFile); err != nil {
			return err
		}
	}
	sec.bearer = sec.bearerTokens()
	hooks := map[schema.GroupVersionResource]func(context.Context, *unstructured.Unstructured) (*unstructured.Unstructured, error){
		// Access reviews answer as requests are authorized: Node, then RBAC.
		{Group: "authorization.k8s.io", Version: "v1", Resource: registry.SelfSubjectAccessReviews}:  sec.node.SelfReview(sec.authz.CreateSelfSubjectAccessReview),
		{Group: "authorization.k8s.io", Version: "v1", Resource: registry.SubjectAccessReviews}:      sec.node.Review(sec.authz.CreateSubjectAccessReview),
		{Group: "authorization.k8s.io", Version: "v1", Resource: registry.LocalSubjectAccessReviews}: sec.node.Review(sec.authz.CreateLocalSubjectAccessReview),
		{Group: "authorization.k8s.io", Version: "v1", Resource: registry.SelfSubjectRulesReviews}:   sec.node.SelfRulesReview(sec.authz.CreateSelfSubjectRulesReview),
		{Group: "authentication.k8s.io", Version: "v1", Resource: registry.SelfSubjectReviews}:       rbac.CreateSelfSubjectReview,
		{Group: "authentication.k8s.io", Version: "v1beta1", Resource: registry.SelfSubjectReviews}:  rbac.CreateSelfSubjectReview,
		{Group: "authentication.k8s.io", Version: "v1", Resource: registry.TokenReviews}:             sec.createTokenReview,
	}
	for gvr, h := range hooks {
		k, ok := s.Registry.Lookup(gvr)
		if !ok {
			return fmt.Errorf("auth: no built-in kind %s", gvr)
		}
		k.Create = h
	}
	for _, k := range s.Registry.Kinds() {
		if (k.Group == "authorization.k8s.io" || k.Group == "authentication.k8s.io") && k.Create == nil {
			return fmt.Errorf("auth: computed kind %s has no hook", k.GVR()) // it would be stored
		}
	}
	sa, ok := s.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"})
	if !ok {
		return fmt.Errorf("auth: no built-in serviceaccounts")
	}
	sa.Subresources = map[string]*registry.Subresource{"token": {
		Group: authenticationv1.GroupName, Version: "v1", Kind: "TokenRequest",
		NewTyped: func() runtime.Object { return &authenticationv1.TokenRequest{} },
		Create:   sec.tokens.CreateToken,
	}}
	s.auth = sec
	return nil
}

// authorizer is the request authorizer, in kube-apiserver's mode order Node,RBAC: the Node
// authorizer allows a node's requests about itself and its pods or has no opinion, then
// RBAC decides.
func (sec *authState) authorizer() filters.Authorizer {
	return nodeauth.Union{{Name: nodeauth.Name, Authorizer: sec.node}, {Name: "rbac", Authorizer: sec.authz}}
}

// NodeAuthorizer is the server's Node authorizer (tests feed its graph by hand).
func (s *Server) NodeAuthorizer() *nodeauth.Authorizer { return s.auth.node }

// authenticators is the authentication chain: client certificates, then bearer tokens
// through the token cache (bearerTokens).
func (sec *authState) authenticators(s *Server) []filters.Authenticator {
	return []filters.Authenticator{filters.X509{Roots: s.pki.ClientCAPool(), Cache: &filters.VerifyCache{}},
		filters.BearerToken{Tokens: []filters.TokenAuthenticator{sec.bearer}}}
}

// clientAuthTLS makes the TLS layer ask for client certificates without verifying them:
// X509 verifies them, so that an expired certificate or one of another CA is answered 401
// (as kube-apiserver answers it) rather than failing the handshake.
func clientAuthTLS(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }

// startAuth starts the RBAC snapshot, the service-account cache and the ClusterRole
// aggregation controller, creates the bootstrap policy and waits until the authorizer sees
// it (the controllers' identities are authorized through it).
func (s *Server) startAuth(ctx context.Context, wg *sync.WaitGroup) error {
	sec := s.auth
	log := s.opts.Log
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				log.Error("stopped", "component", name, "err", err)
			}
		}()
	}
	run("rbac-authorizer", func(ctx context.Context) error { return sec.authz.Start(ctx, sec.client) })
	run("node-authorizer", func(ctx context.Context) error { return sec.node.Start(ctx, sec.client) })
	run("serviceaccount-tokens", sec.tokens.Start)
	// Bootstrap tokens (kube-apiserver's --enable-bootstrap-token-auth, on as kubeadm sets it).
	secrets := informers.NewSharedInformerFactoryWithOptions(sec.client, 0, informers.WithNamespace(metav1.NamespaceSystem))
	sec.bootstrap.auth.Store(bootstrap.NewTokenAuthenticator(secrets.Core().V1().Secrets().Lister().Secrets(metav1.NamespaceSystem)))
	secrets.Start(ctx.Done())
	agg := &rbac.AggregationController{Client: sec.client, Log: log.With("controller", "clusterrole-aggregation")}
	run("clusterrole-aggregation", agg.Start)

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(wctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := rbac.EnsureBootstrapPolicy(ctx, sec.client); err != nil {
			log.Warn("bootstrap RBAC policy", "err", err)
			return false, nil
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: %w", err)
	}
	controller := &rbac.Attributes{User: ControllerUser("probe"), Groups: []string{ControllersGroup}, ResourceRequest: true,
		Verb: "list", APIGroup: "", Resource: "namespaces"}
	basic := &rbac.Attributes{User: "probe", Groups: []string{"system:authenticated"}, ResourceRequest: true,
		Verb: "create", APIGroup: "authorization.k8s.io", Resource: registry.SelfSubjectAccessReviews}
	if err := wait.PollUntilContextCancel(wctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		snap := sec.authz.Snapshot()
		return snap.Allows(controller) && snap.Allows(basic), nil
	}); err != nil {
		return fmt.Errorf("RBAC authorizer did not see the bootstrap policy: %w", err)
	}
	return nil
}

// createTokenReview authenticates spec.token for spec.audiences (none: the API's) through
// the same cached authenticators as requests, as upstream's TokenReview storage calls its
// request authenticator: a token a request may use is authenticated here, for 10 s after a
// success too.
func (sec *authState) createTokenReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var tr authenticationv1.TokenReview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &tr); err != nil {
		return nil, err
	}
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	tr.Status = authenticationv1.TokenReviewStatus{}
	u, auds, ok, err := sec.bearer.Review(ctx, tr.Spec.Token, tr.Spec.Audiences)
	switch {
	case err != nil:
		tr.Status.Error = err.Error()
	case !ok:
		tr.Status.Error = "unknown token"
	default:
		tr.Status.Authenticated = true
		tr.Status.Audiences = auds
		tr.Status.User = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
		for k, v := range u.Extra {
			if tr.Status.User.Extra == nil {
				tr.Status.User.Extra = map[string]authenticationv1.ExtraValue{}
			}
			tr.Status.User.Extra[k] = v
		}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tr)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// admission returns next (the admission chain, may be nil) followed by RBAC's escalation
// prevention, which upstream runs in the RBAC storage after admission.
func (sec *authState) admission(next admission.Interface) admission.Interface {
	if next == nil {
		return sec.escalation
	}
	return admissionThen{next, sec.escalation}
}

// admissionThen runs first, then second.
type admissionThen struct{ first, second admission.Interface }

func (p admissionThen) Admit(ctx context.Context, a *admission.Attributes) error {
	if err := p.first.Admit(ctx, a); err != nil {
		return err
	}
	return p.second.Admit(ctx, a)
}

func (p admissionThen) Validate(ctx context.Context, a *admission.Attributes) error {
	if err := p.first.Validate(ctx, a); err != nil {
		return err
	}
	return p.second.Validate(ctx, a)
}
