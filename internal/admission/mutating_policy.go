package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// MutatingPolicies applies MutatingAdmissionPolicies (admissionregistration.k8s.io/v1)
// through their bindings, as kube-apiserver's MutatingAdmissionPolicy plugin does: upstream's
// CEL compiler (k8s.io/apiserver/pkg/admission/plugin/cel: variables, matchConditions, the
// Object{} and JSONPatch{} constructors) and upstream's patchers (an ApplyConfiguration merged
// with structured-merge-diff through the kind's schema, or a JSON patch). Bindings are taken
// in name order and each policy's mutations in order, each seeing the previous one's result.
//
// It runs before the mutating webhooks, as upstream orders them; Reinvoke runs the policies
// with reinvocationPolicy IfNeeded once more when the webhooks changed the object.
//
// An evaluation error refuses the request unless the policy's failurePolicy is Ignore, with
// upstream's message ("policy 'p' with binding 'b' denied request: …").
type MutatingPolicies struct {
	o PolicyOptions

	mu       sync.Mutex
	compiled map[string]*compiledMutating // by policy name; replaced when its resourceVersion moves
}

var _ Reinvoker = (*MutatingPolicies)(nil)

type compiledMutating struct {
	rv       string
	compiler *plugincel.CompositedCompiler
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
	err      error
}

// NewMutatingPolicies builds the plugin.
func NewMutatingPolicies(o PolicyOptions) *MutatingPolicies {
	return &MutatingPolicies{o: o, compiled: map[string]*compiledMutating{}}
}

// compile returns the policy's evaluators, compiling them once per resourceVersion.
// Expression errors are kept by the evaluators and reported when the policy runs.
func (p *MutatingPolicies) compile(pol *admissionregistrationv1.MutatingAdmissionPolicy) *compiledMutating {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.compiled[pol.Name]; ok && c.rv == pol.ResourceVersion {
		return c
	}
	c := &compiledMutating{rv: pol.ResourceVersion}
	p.compiled[pol.Name] = c
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		c.err = fmt.Errorf("failed to initialize CEL compiler: %w", err)
		return c
	}
	c.compiler = compiler
	opts := plugincel.OptionalVariableDeclarations{HasParams: pol.Spec.ParamKind != nil, HasAuthorizer: true}
	vars := make([]plugincel.NamedExpressionAccessor, len(pol.Spec.Variables))
	for i, v := range pol.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	if mc := pol.Spec.MatchConditions; len(mc) > 0 {
		acc := make([]plugincel.ExpressionAccessor, len(mc))
		for i := range mc {
			acc[i] = (*matchconditions.MatchCondition)(&mc[i])
		}
		c.matcher = matchconditions.NewMatcher(compiler.CompileCondition(acc, opts, environment.StoredExpressions), pol.Spec.FailurePolicy, "policy", "validate", pol.Name)
	}
	popts := opts
	popts.HasPatchTypes = true
	for i, m := range pol.Spec.Mutations {
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			ev := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, popts, environment.StoredExpressions)
			c.patchers = append(c.patchers, patch.NewJSONPatcher(ev))
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			ev := compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, popts, environment.StoredExpressions)
			c.patchers = append(c.patchers, patch.NewApplyConfigurationPatcher(ev))
		default:
			c.err = fmt.Errorf("spec.mutations[%d]: patchType %q without its expression", i, m.PatchType)
			return c
		}
	}
	return c
}

// Admit implements Mutator.
func (p *MutatingPolicies) Admit(ctx context.Context, a *Attributes) error {
	return p.run(ctx, a, nil)
}

// Reinvocable implements Reinvoker: some bound policy has reinvocationPolicy IfNeeded.
func (p *MutatingPolicies) Reinvocable() bool {
	bound := map[string]bool{}
	for _, b := range p.o.Source.MutatingAdmissionPolicyBindings() {
		bound[b.Spec.PolicyName] = true
	}
	if len(bound) == 0 {
		return false
	}
	for _, pol := range p.o.Source.MutatingAdmissionPolicies() {
		if bound[pol.Name] && pol.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			return true
		}
	}
	return false
}

// Reinvoke runs, once more, the policies with reinvocationPolicy IfNeeded that matched
// the request; the REST handler's chain calls it when the webhooks changed the object.
func (p *MutatingPolicies) Reinvoke(ctx context.Context, a *Attributes) error {
	return p.run(ctx, a, func(pol *admissionregistrationv1.MutatingAdmissionPolicy) bool {
		return pol.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
	})
}

func (p *MutatingPolicies) run(ctx context.Context, a *Attributes, only func(*admissionregistrationv1.MutatingAdmissionPolicy) bool) error {
	if a.Object == nil || a.Operation == Delete {
		return nil
	}
	bindings := p.o.Source.MutatingAdmissionPolicyBindings()
	if len(bindings) == 0 {
		return nil
	}
	policies := map[string]*admissionregistrationv1.MutatingAdmissionPolicy{}
	for _, pol := range p.o.Source.MutatingAdmissionPolicies() {
		policies[pol.Name] = pol
	}
	var (
		va      *k8sadmission.VersionedAttributes
		ns      *corev1.Namespace
		nsDone  bool
		denials []error
	)
	for _, b := range bindings {
		pol := policies[b.Spec.PolicyName]
		if pol == nil || (only != nil && !only(pol)) {
			continue
		}
		ok, err := p.matches(ctx, pol, b, a)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if va == nil {
			va = versionedAttributes(a)
		}
		if !nsDone {
			nsDone = true
			if a.Namespace != "" && !(a.Kind.Group == "" && a.Kind.Kind == "Namespace") {
				if ns = p.o.Source.Namespace(ctx, a.Namespace); ns == nil {
					return apierrors.NewNotFound(corev1.Resource("namespaces"), a.Namespace)
				}
			}
		}
		if err := p.apply(ctx, pol, b, a, va, ns); err != nil {
			var se *apierrors.StatusError
			if errors.As(err, &se) {
				return se
			}
			if pol.Spec.FailurePolicy != nil && *pol.Spec.FailurePolicy == admissionregistrationv1.Ignore {
				continue
			}
			denials = append(denials, fmt.Errorf("policy '%s' with binding '%s' denied request: %w", pol.Name, b.Name, err))
		}
	}
	if va != nil && va.Dirty {
		u, err := toUnstructured(va.VersionedObject.Object())
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		a.Object.Object = u.Object
	}
	if len(denials) == 0 {
		return nil
	}
	se := apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("admission request denied by policy"))
	se.ErrStatus.Message = denials[0].Error()
	se.ErrStatus.Reason = metav1.StatusReasonInvalid
	for _, d := range denials {
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{Message: d.Error()})
	}
	return se
}

// apply runs one policy's mutations through one binding on va.
func (p *MutatingPolicies) apply(ctx context.Context, pol *admissionregistrationv1.MutatingAdmissionPolicy, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, a *Attributes, va *k8sadmission.VersionedAttributes, ns *corev1.Namespace) error {
	c := p.compile(pol)
	if c.err != nil {
		return c.err
	}
	ctx = c.compiler.CreateContext(ctx)
	var param runtime.Object
	if pk := pol.Spec.ParamKind; pk != nil {
		m, err := p.param(ctx, pk, b, a)
		if err != nil {
			return err
		}
		if m == nil {
			if b.Spec.ParamRef != nil && b.Spec.ParamRef.ParameterNotFoundAction != nil && *b.Spec.ParamRef.ParameterNotFoundAction == admissionregistrationv1.AllowAction {
				return nil
			}
			return errors.New("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")
		}
		param = &unstructured.Unstructured{Object: m}
	}
	if c.matcher != nil {
		r := c.matcher.Match(ctx, va, param, nil)
		if r.Error != nil {
			return r.Error
		}
		if !r.Matches {
			return nil
		}
	}
	var tc managedfields.TypeConverter
	if a.TypeConverter != nil {
		tc = a.TypeConverter()
	}
	if tc == nil {
		tc = managedfields.NewDeducedTypeConverter()
	}
	oi := k8sadmission.NewObjectInterfacesFromScheme(runtime.NewScheme())
	for _, pt := range c.patchers {
		out, err := pt.Patch(ctx, patch.Request{
			MatchedResource: a.Resource, VersionedAttributes: va, ObjectInterfaces: oi,
			OptionalVariables: plugincel.OptionalVariableBindings{VersionedParams: param},
			Namespace:         ns, TypeConverter: tc,
		}, celconfig.RuntimeCELCostBudget)
		if err != nil {
			return err
		}
		u, err := toUnstructured(out)
		if err != nil {
			return err
		}
		u.SetGroupVersionKind(a.Kind)
		if !apiequality.Semantic.DeepEqual(u.Object, va.VersionedObject.Object().(*unstructured.Unstructured).Object) {
			va.UpdateObject(u)
		}
	}
	return nil
}

func (p *MutatingPolicies) matches(ctx context.Context, pol *admissionregistrationv1.MutatingAdmissionPolicy, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, a *Attributes) (bool, error) {
	if pol.Spec.MatchConstraints == nil {
		return false, nil
	}
	for _, mr := range []*admissionregistrationv1.MatchResources{pol.Spec.MatchConstraints, b.Spec.MatchResources} {
		if mr == nil {
			continue
		}
		ok, err := matchResources(ctx, p.o.Source, mr, a)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (p *MutatingPolicies) param(ctx context.Context, pk *admissionregistrationv1.ParamKind, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, a *Attributes) (map[string]any, error) {
	ref := b.Spec.ParamRef
	if ref == nil {
		return nil, fmt.Errorf("MutatingAdmissionPolicyBinding '%s': the policy has a paramKind but the binding has no paramRef", b.Name)
	}
	if ref.Name == "" {
		return nil, fmt.Errorf("MutatingAdmissionPolicyBinding '%s': paramRef.selector is not supported by Kube: name the parameter object", b.Name)
	}
	if p.o.Params == nil {
		return nil, errors.New("policy parameters are not available")
	}
	ns := ref.Namespace
	if ns == "" {
		ns = a.Namespace
	}
	return p.o.Params.GetParam(ctx, pk.APIVersion, pk.Kind, ns, ref.Name)
}

// versionedAttributes is a in upstream's admission terms: the object is a deep copy, so
// that a refused request leaves a.Object as it was.
func versionedAttributes(a *Attributes) *k8sadmission.VersionedAttributes {
	obj := a.Object.DeepCopy()
	var old runtime.Object
	if a.OldObject != nil {
		old = a.OldObject
	}
	var u user.Info
	if a.User != nil {
		u = &user.DefaultInfo{Name: a.User.Name, UID: a.User.UID, Groups: a.User.Groups}
	}
	var opts runtime.Object
	if a.Options != nil {
		opts = &unstructured.Unstructured{Object: a.Options}
	}
	attrs := k8sadmission.NewAttributesRecord(obj, old, a.Kind, a.Namespace, a.Name, a.Resource, a.Subresource,
		k8sadmission.Operation(a.Operation), opts, a.DryRun, u)
	return &k8sadmission.VersionedAttributes{Attributes: attrs, VersionedKind: a.Kind,
		VersionedObject: k8sadmission.NewLazyObject(obj), VersionedOldObject: k8sadmission.NewLazyObject(old)}
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
