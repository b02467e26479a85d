package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// Admission is the platform's admission plugin. Mutating: a new object of a kind the
// engine drives gets the engine's finalizer (Admit). Validating:
//   - a platform object whose dependencies would close a cycle is refused (403, with the
//     cycle path); a dependsOn naming an unknown kind, or a namespace of another tenant, is
//     refused (422);
//   - a data kind's spec.server naming an entry that does not exist is refused (422), one
//     the object's tenant may not use (403) (dataadmission.go);
//   - each kind's own validator (kindValidators) refuses bad input with 422;
//   - creating an object in a tenant's namespace past a Quota limit is refused (403 naming
//     the Quota and the limit);
//   - an object (any kind, custom resources included) whose spec references a Secret no
//     SecretPolicy of its namespace allows for its kind is refused (403 naming the policy).
//
// It reads Namespaces, Quotas and SecretPolicies from Reader once SetReader is called (an
// informer cache); before that only the cycle check runs.
type Admission struct {
	Engine  *lifecycle.Engine
	Counter Counter
	reader  atomic.Pointer[client.Reader]
}

var (
	_ admission.Validator = (*Admission)(nil)
	_ admission.Mutator   = (*Admission)(nil)
)

// SetReader supplies the informer cache once it has synced.
func (a *Admission) SetReader(r client.Reader) { a.reader.Store(&r) }

func (a *Admission) getReader() client.Reader {
	if p := a.reader.Load(); p != nil {
		return *p
	}
	return nil
}

// Admit implements admission.Mutator: a new object of a kind the engine drives gets the
// engine's finalizer at create, so that the engine's first pass does not write it in an
// update of its own (one write fewer per object, and no conflict for a client that updates
// the object it just created).
func (a *Admission) Admit(_ context.Context, at *admission.Attributes) error {
	if at.Operation != admission.Create || at.Subresource != "" || at.Object == nil ||
		at.Kind.Group != v1alpha1.Group || a.Engine == nil || !slices.Contains(a.Engine.Kinds(), at.Kind.Kind) {
		return nil
	}
	if fins := at.Object.GetFinalizers(); !slices.Contains(fins, lifecycle.Finalizer) {
		at.Object.SetFinalizers(append(fins, lifecycle.Finalizer))
	}
	return nil
}

// Validate implements admission.Validator.
func (a *Admission) Validate(ctx context.Context, at *admission.Attributes) error {
	if at.Subresource != "" || at.Operation == admission.Delete {
		return nil
	}
	r := a.getReader()
	if at.Kind.Group == v1alpha1.Group && at.Object != nil {
		if err := a.checkCycle(at); err != nil {
			return err
		}
		if err := a.checkKind(ctx, r, at); err != nil {
			return err
		}
	}
	if r == nil || at.Namespace == "" {
		return nil
	}
	if at.Operation == admission.Create {
		if err := a.checkQuota(ctx, r, at); err != nil {
			return err
		}
	}
	if at.Object != nil {
		return a.checkSecrets(ctx, r, at)
	}
	return nil
}

func (a *Admission) checkCycle(at *admission.Attributes) error {
	obj := a.Engine.NewObject(at.Kind.Kind)
	if obj == nil {
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(at.Object.Object, obj); err != nil {
		return nil // schema validation reports malformed objects
	}
	obj.SetNamespace(at.Namespace)
	obj.SetName(at.Name)
	var cycle *lifecycle.CycleError
	if err := a.Engine.CheckDependencies(at.Kind.Kind, obj); errors.As(err, &cycle) {
		return apierrors.NewForbidden(at.Resource.GroupResource(), at.Name,
			fmt.Errorf("its dependencies would close a %w", err))
	}
	return nil
}

// resourceName is how Quota limits name a resource: plural, ".group" unless core.
func resourceName(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

func (a *Admission) checkQuota(ctx context.Context, r client.Reader, at *admission.Attributes) error {
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: at.Namespace}, &ns); err != nil {
		return nil
	}
	tenant := ns.Labels[v1alpha1.LabelTenant]
	if tenant == "" {
		return nil
	}
	var quotas v1alpha1.QuotaList
	if err := r.List(ctx, &quotas); err != nil {
		return err
	}
	res := resourceName(at.Resource.GroupResource())
	for _, q := range quotas.Items {
		if q.Spec.Tenant != tenant || q.DeletionTimestamp != nil {
			continue
		}
		for _, l := range q.Spec.Limits {
			if l.Resource != res || (l.Namespace != "" && l.Namespace != at.Namespace) {
				continue
			}
			in := []string{at.Namespace}
			scope := "namespace " + at.Namespace
			if l.Namespace == "" {
				var err error
				if in, err = tenantNamespaces(ctx, r, tenant); err != nil {
					return err
				}
				scope = "tenant " + tenant
			}
			n, err := a.Counter.Count(ctx, res, in)
			if err != nil {
				return err
			}
			if n+1 > l.Max {
				return apierrors.NewForbidden(at.Resource.GroupResource(), at.Name,
					fmt.Errorf("exceeded quota: Quota %s limits %s to %d in %s (%d in use)", q.Name, res, l.Max, scope, n))
			}
		}
	}
	return nil
}

// secretRefs lists the Secrets an object's spec references, found by the field
// conventions Kubernetes APIs and custom resources follow: a string "secretName"; an object
// {name} under "secret", "secretRef", "secretKeyRef" or a key ending in "SecretRef"; a list
// of {name} under "imagePullSecrets" or a key ending in "Secrets". A Pod's volumes, env and
// imagePullSecrets and a custom resource's spec.secretRef.name are all found this way.
func secretRefs(spec any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, f := range v {
				switch {
				case k == "secretName":
					if name, ok := f.(string); ok && name != "" {
						out = append(out, name)
					}
				case k == "secret" || k == "secretRef" || k == "secretKeyRef" || strings.HasSuffix(k, "SecretRef"):
					if m, ok := f.(map[string]any); ok {
						if name, ok := m["name"].(string); ok && name != "" {
							out = append(out, name)
						}
					}
				case strings.HasSuffix(k, "Secrets"):
					if l, ok := f.([]any); ok {
						for _, e := range l {
							if m, ok := e.(map[string]any); ok {
								if name, ok := m["name"].(string); ok && name != "" {
									out = append(out, name)
								}
							}
						}
					}
				}
				walk(f)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(spec)
	slices.Sort(out)
	return slices.Compact(out)
}

// checkSecrets refuses an object (of any kind, custom resources included) whose spec
// references a Secret that no SecretPolicy of its namespace allows its kind to reference.
// Namespaces without a SecretPolicy are not constrained.
func (a *Admission) checkSecrets(ctx context.Context, r client.Reader, at *admission.Attributes) error {
	spec, ok := at.Object.Object["spec"]
	if !ok {
		return nil
	}
	var policies v1alpha1.SecretPolicyList
	if err := r.List(ctx, &policies, client.InNamespace(at.Namespace)); err != nil || len(policies.Items) == 0 {
		return err
	}
	kind := at.Kind.Kind
	for _, s := range secretRefs(spec) {
		if !secretAllowed(policies.Items, kind, s) {
			names := make([]string, len(policies.Items))
			for i, p := range policies.Items {
				names[i] = p.Name
			}
			return apierrors.NewForbidden(at.Resource.GroupResource(), at.Name,
				fmt.Errorf("secret %q may not be referenced by a %s in namespace %s: no rule of SecretPolicy %s allows it", s, kind, at.Namespace, strings.Join(names, ", ")))
		}
	}
	return nil
}

func secretAllowed(policies []v1alpha1.SecretPolicy, kind, secret string) bool {
	for _, p := range policies {
		for _, rule := range p.Spec.Rules {
			if !slices.Contains(rule.Kinds, kind) && !slices.Contains(rule.Kinds, "*") {
				continue
			}
			for _, n := range rule.SecretNames {
				if n == secret || (strings.HasSuffix(n, "*") && strings.HasPrefix(secret, strings.TrimSuffix(n, "*"))) {
					return true
				}
			}
		}
	}
	return false
}

// Authorizer enforces AccessPolicies after the inner authorizer allowed a request: a
// subject of a policy asking for anything in a namespace of the policy's tenant whose
// environment is not in allowedEnvs, or not through one of the policy's via (impersonator
// or user agent), is refused, with the reason.
type Authorizer struct {
	Inner interface {
		Authorize(ctx context.Context, u *request.User, info *request.Info) (bool, string)
	}
	reader atomic.Pointer[client.Reader]
}

// SetReader supplies the informer cache once it has synced.
func (z *Authorizer) SetReader(r client.Reader) { z.reader.Store(&r) }

// Authorize implements the API server's Authorizer.
func (z *Authorizer) Authorize(ctx context.Context, u *request.User, info *request.Info) (bool, string) {
	ok, reason := z.Inner.Authorize(ctx, u, info)
	if !ok || u == nil || info == nil || !info.IsResourceRequest || info.Namespace == "" {
		return ok, reason
	}
	p := z.reader.Load()
	if p == nil {
		return ok, reason
	}
	if deny := AccessDenied(ctx, *p, u, info); deny != "" {
		return false, deny
	}
	return ok, reason
}

// AccessDenied returns why u may not make the request info describes (in info.Namespace),
// or "" when no AccessPolicy stands in the way. A policy of the namespace's tenant that
// names u among its subjects refuses an environment outside allowedEnvs and, when it lists
// via, a request that comes neither through one of those identities (the impersonator) nor
// with a user agent one of them begins (the product token, "kube-deploy" for
// "kube-deploy/1.2 (linux/amd64)").
func AccessDenied(ctx context.Context, r client.Reader, u *request.User, info *request.Info) string {
	namespace := info.Namespace
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return ""
	}
	tenant, env := ns.Labels[v1alpha1.LabelTenant], ns.Labels[v1alpha1.LabelEnv]
	if tenant == "" {
		return ""
	}
	var policies v1alpha1.AccessPolicyList
	if err := r.List(ctx, &policies); err != nil {
		return ""
	}
	for _, p := range policies.Items {
		if p.Spec.Tenant != tenant || !subjectMatches(p.Spec.Subjects, u) {
			continue
		}
		if !slices.Contains(p.Spec.AllowedEnvs, env) {
			return fmt.Sprintf("AccessPolicy %s allows %s only in environments [%s] of tenant %s; namespace %s is environment %q",
				p.Name, u.Name, strings.Join(p.Spec.AllowedEnvs, ", "), tenant, namespace, env)
		}
		if len(p.Spec.Via) > 0 && !viaMatches(p.Spec.Via, info) {
			came := fmt.Sprintf("user agent %q", info.UserAgent)
			if info.Impersonator != "" {
				came = fmt.Sprintf("impersonated by %s with %s", info.Impersonator, came)
			}
			return fmt.Sprintf("AccessPolicy %s allows %s in tenant %s only via [%s]; this request came with %s",
				p.Name, u.Name, tenant, strings.Join(p.Spec.Via, ", "), came)
		}
	}
	return ""
}

// viaMatches reports whether the request came through one of via: its impersonator, or a
// user agent whose product token (before "/" or a space) is an entry.
func viaMatches(via []string, info *request.Info) bool {
	product, _, _ := strings.Cut(info.UserAgent, "/")
	product, _, _ = strings.Cut(product, " ")
	for _, v := range via {
		if (info.Impersonator != "" && v == info.Impersonator) || (product != "" && v == product) {
			return true
		}
	}
	return false
}

func subjectMatches(subjects []v1alpha1.Subject, u *request.User) bool {
	for _, s := range subjects {
		if (s.Kind == "User" && s.Name == u.Name) || (s.Kind == "Group" && slices.Contains(u.Groups, s.Name)) {
			return true
		}
	}
	return false
}
