package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"kubeos.dev/kube/internal/apiserver/request"
)

// DefaultIssuer is the issuer, and the default audience, of Kube's tokens (as
// kube-apiserver's usual --service-account-issuer).
const DefaultIssuer = "https://kubernetes.default.svc"

// Token lifetimes, as upstream's TokenRequest.
const (
	DefaultExpiration = time.Hour
	MinExpiration     = 10 * time.Minute
	MaxExpiration     = (1 << 32) * time.Second
)

// Tokens issues and validates service-account tokens.
type Tokens struct {
	key    *ecdsa.PrivateKey
	kid    string
	issuer string
	// client reads ServiceAccounts live (token issue; validation when the cache disagrees).
	client kubernetes.Interface
	now    func() time.Time
	lister atomic.Pointer[corelisters.ServiceAccountLister]
}

// New returns token support signing with key (ECDSA P-256) as issuer ("" means
// DefaultIssuer); client reads ServiceAccounts (a loopback client allowed to). now nil means
// time.Now.
func New(key crypto.Signer, issuer string, client kubernetes.Interface, now func() time.Time) (*Tokens, error) {
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("serviceaccount: the signing key is %T, want an ECDSA P-256 key", key)
	}
	kid, err := keyID(ec.Public())
	if err != nil {
		return nil, err
	}
	if issuer == "" {
		issuer = DefaultIssuer
	}
	if now == nil {
		now = time.Now
	}
	return &Tokens{key: ec, kid: kid, issuer: issuer, client: client, now: now}, nil
}

// Issuer is the tokens' issuer and default audience.
func (t *Tokens) Issuer() string { return t.issuer }

// Start keeps an informer cache of ServiceAccounts for validation; blocks until ctx ends.
func (t *Tokens) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(t.client, 0)
	inf := f.Core().V1().ServiceAccounts()
	inf.Informer()
	f.Start(ctx.Done())
	defer f.Shutdown()
	for _, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil
		}
	}
	l := inf.Lister()
	t.lister.Store(&l)
	<-ctx.Done()
	return nil
}

// Issue signs a token for sa.
func (t *Tokens) Issue(sa *corev1.ServiceAccount, audiences []string, expiration time.Duration, bound *authenticationv1.BoundObjectReference) (string, time.Time, error) {
	now := t.now()
	exp := now.Add(expiration)
	c := &Claims{
		Issuer: t.issuer, Subject: User(sa.Namespace, sa.Name), Audience: audiences,
		Expiry: exp.Unix(), IssuedAt: now.Unix(), NotBefore: now.Unix(), ID: uuid.NewString(),
		Kubernetes: K8s{Namespace: sa.Namespace, ServiceAccount: Ref{Name: sa.Name, UID: string(sa.UID)}},
	}
	if bound != nil {
		ref := &Ref{Name: bound.Name, UID: string(bound.UID)}
		switch bound.Kind {
		case "Pod":
			c.Kubernetes.Pod = ref
		case "Secret":
			c.Kubernetes.Secret = ref
		case "Node":
			c.Kubernetes.Node = ref
		}
	}
	tok, err := sign(t.key, t.kid, c)
	return tok, exp, err
}

// User is the user name of a service account.
func User(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

var tokenRequestGK = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

// CreateToken serves POST .../serviceaccounts/<name>/token (a registry.Subresource hook).
func (t *Tokens) CreateToken(ctx context.Context, namespace, name string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var tr authenticationv1.TokenRequest
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &tr); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	expiration := DefaultExpiration
	if tr.Spec.ExpirationSeconds != nil {
		expiration = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
		switch {
		case expiration < MinExpiration:
			errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *tr.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
		case expiration > MaxExpiration:
			errs = append(errs, field.TooLong(spec.Child("expirationSeconds"), *tr.Spec.ExpirationSeconds, 1<<32))
		}
	}
	if b := tr.Spec.BoundObjectRef; b != nil {
		if !slices.Contains([]string{"Pod", "Secret", "Node"}, b.Kind) || (b.APIVersion != "" && b.APIVersion != "v1") {
			errs = append(errs, field.NotSupported(spec.Child("boundObjectRef", "kind"), b.Kind, []string{"Pod", "Secret", "Node"}))
		}
		if b.Name == "" {
			errs = append(errs, field.Required(spec.Child("boundObjectRef", "name"), ""))
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestGK, name, errs)
	}
	audiences := tr.Spec.Audiences
	if len(audiences) == 0 {
		audiences = []string{t.issuer}
	}
	sa, err := t.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	tok, exp, err := t.Issue(sa, audiences, expiration, tr.Spec.BoundObjectRef)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	tr.Name, tr.Namespace = name, namespace
	tr.CreationTimestamp = metav1.NewTime(t.now())
	tr.Spec.Audiences = audiences
	secs := int64(expiration / time.Second)
	tr.Spec.ExpirationSeconds = &secs
	tr.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(exp)}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tr)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(authenticationv1.SchemeGroupVersion.String())
	u.SetKind("TokenRequest")
	return u, nil
}

// AuthenticateToken implements the filter chain's TokenAuthenticator for the default
// audience.
func (t *Tokens) AuthenticateToken(ctx context.Context, token string) (*request.User, bool, error) {
	u, _, ok, err := t.Validate(ctx, token, nil)
	return u, ok, err
}

// Validate checks a token for audiences (nil: the issuer). ok is false (and err nil) for a
// token that is not one of Kube's (another issuer, not a JWT); err says why one of Kube's
// tokens is invalid. It returns the audiences of the token that matched.
func (t *Tokens) Validate(ctx context.Context, token string, audiences []string) (u *request.User, matched []string, ok bool, err error) {
	if !t.mine(token) {
		return nil, nil, false, nil
	}
	c, err := parse(&t.key.PublicKey, token)
	if err != nil {
		return nil, nil, false, err
	}
	now := t.now().Unix()
	const leeway = 60
	switch {
	case c.Expiry == 0 || now > c.Expiry:
		return nil, nil, false, fmt.Errorf("%w: expired", ErrInvalidToken)
	case c.NotBefore > now+leeway:
		return nil, nil, false, fmt.Errorf("%w: not valid yet", ErrInvalidToken)
	}
	if audiences == nil {
		audiences = []string{t.issuer}
	}
	for _, a := range c.Audience {
		if slices.Contains(audiences, a) {
			matched = append(matched, a)
		}
	}
	if len(matched) == 0 {
		return nil, nil, false, fmt.Errorf("%w: audience %q not accepted", ErrInvalidToken, c.Audience)
	}
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || c.Subject != User(k.Namespace, k.ServiceAccount.Name) {
		return nil, nil, false, fmt.Errorf("%w: malformed kubernetes.io claims", ErrInvalidToken)
	}
	sa, err := t.lookup(ctx, k.Namespace, k.ServiceAccount.Name, k.ServiceAccount.UID)
	if err != nil {
		return nil, nil, false, err
	}
	invalidIfDeletedBefore := t.now().Add(-leeway * time.Second)
	if sa.DeletionTimestamp != nil && sa.DeletionTimestamp.Time.Before(invalidIfDeletedBefore) {
		return nil, nil, false, fmt.Errorf("%w: service account %s/%s has been deleted", ErrInvalidToken, k.Namespace, k.ServiceAccount.Name)
	}
	if err := t.checkBound(ctx, k, invalidIfDeletedBefore); err != nil {
		return nil, nil, false, err
	}
	return &request.User{
		Name: c.Subject, UID: string(sa.UID),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.Namespace, "system:authenticated"},
	}, matched, true, nil
}

// mine reports whether token looks like a JWT of this issuer (without verifying it).
func (t *Tokens) mine(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	pb, err := b64.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	return json.Unmarshal(pb, &c) == nil && c.Issuer == t.issuer
}

// checkBound checks the objects a token is bound to (TokenRequest's boundObjectRef), as
// kube-apiserver's validator: the Secret, else the Pod, else (a token bound to a Node alone)
// the Node must exist with the token's UID and not have been deleting since before
// invalidIfDeletedBefore (now minus the 60 s leeway). The ServiceAccount itself likewise. A
// pod's token thus stops working once its pod is gone (after the token cache's 10 s). They
// are read live: the token cache keeps a success for 10 s, so this is at most one read per
// token and object every 10 s.
func (t *Tokens) checkBound(ctx context.Context, k K8s, invalidIfDeletedBefore time.Time) error {
	type bound struct {
		kind string
		ref  *Ref
		get  func() (metav1.Object, error)
	}
	core := t.client.CoreV1()
	checks := []bound{
		{"secret", k.Secret, func() (metav1.Object, error) {
			return core.Secrets(k.Namespace).Get(ctx, k.Secret.Name, metav1.GetOptions{})
		}},
		{"pod", k.Pod, func() (metav1.Object, error) { return core.Pods(k.Namespace).Get(ctx, k.Pod.Name, metav1.GetOptions{}) }},
	}
	if k.Pod == nil {
		checks = append(checks, bound{"node", k.Node, func() (metav1.Object, error) { return core.Nodes().Get(ctx, k.Node.Name, metav1.GetOptions{}) }})
	}
	for _, b := range checks {
		if b.ref == nil {
			continue
		}
		obj, err := b.get()
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%w: the bound %s %s has been deleted", ErrInvalidToken, b.kind, b.ref.Name)
		case err != nil:
			return fmt.Errorf("looking up the bound %s %s: %w", b.kind, b.ref.Name, err)
		case string(obj.GetUID()) != b.ref.UID:
			return fmt.Errorf("%w: %s UID (%s) does not match the token's (%s)", ErrInvalidToken, b.kind, obj.GetUID(), b.ref.UID)
		case obj.GetDeletionTimestamp() != nil && obj.GetDeletionTimestamp().Time.Before(invalidIfDeletedBefore):
			return fmt.Errorf("%w: the bound %s %s is being deleted", ErrInvalidToken, b.kind, b.ref.Name)
		}
	}
	return nil
}

// lookup finds the ServiceAccount with uid: in the cache, else (the cache may lag behind a
// new ServiceAccount) with a live read.
func (t *Tokens) lookup(ctx context.Context, namespace, name, uid string) (*corev1.ServiceAccount, error) {
	if l := t.lister.Load(); l != nil {
		if sa, err := (*l).ServiceAccounts(namespace).Get(name); err == nil && string(sa.UID) == uid {
			return sa, nil
		}
	}
	sa, err := t.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: service account %s/%s has been deleted", ErrInvalidToken, namespace, name)
	case err != nil:
		return nil, fmt.Errorf("looking up service account %s/%s: %w", namespace, name, err)
	case string(sa.UID) != uid:
		return nil, fmt.Errorf("%w: service account %s/%s was re-created (UID %s, token for %s)", ErrInvalidToken, namespace, name, sa.UID, uid)
	}
	return sa, nil
}
