package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"kubeos.dev/kube/internal/apiserver/request"
)

// ParamGetter finds the parameter object of a policy binding (paramRef) by its kind and
// name; nil, nil when it does not exist.
type ParamGetter interface {
	GetParam(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error)
}

// PolicyOptions configure the ValidatingAdmissionPolicy plugin.
type PolicyOptions struct {
	Source Source
	// Params resolves paramRef; without it, policies with a paramKind fail (by their
	// failurePolicy).
	Params ParamGetter
}

// Policies evaluates ValidatingAdmissionPolicies through their bindings with upstream's CEL
// environment (k8s.io/apiserver/pkg/cel/environment: the Kubernetes CEL libraries, cost
// limits). Variables: object, oldObject, request, params, namespaceObject.
type Policies struct {
	o   PolicyOptions
	env *cel.Env

	mu       sync.Mutex
	compiled map[string]*compiledPolicy // by policy name; replaced when its resourceVersion moves
}

var _ Validator = (*Policies)(nil)

type compiledPolicy struct {
	rv          string
	variables   []compiledVariable
	validations []compiledValidation
	err         error // a compile error fails every evaluation (by failurePolicy)
}

type compiledVariable struct {
	name string
	prg  cel.Program
}

type compiledValidation struct {
	v       admissionregistrationv1.Validation
	prg     cel.Program
	message cel.Program // messageExpression, optional
}

// NewPolicies builds the plugin.
func NewPolicies(o PolicyOptions) (*Policies, error) {
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable("object", cel.DynType),
			cel.Variable("oldObject", cel.DynType),
			cel.Variable("request", cel.DynType),
			cel.Variable("params", cel.DynType),
			cel.Variable("namespaceObject", cel.DynType),
			cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		},
	})
	if err != nil {
		return nil, err
	}
	return &Policies{o: o, env: envSet.StoredExpressionsEnv(), compiled: map[string]*compiledPolicy{}}, nil
}

// compile returns the policy's programs, compiling them once per resourceVersion.
func (p *Policies) compile(pol *admissionregistrationv1.ValidatingAdmissionPolicy) *compiledPolicy {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.compiled[pol.Name]; ok && c.rv == pol.ResourceVersion {
		return c
	}
	c := &compiledPolicy{rv: pol.ResourceVersion}
	for i, v := range pol.Spec.Variables {
		prg, err := p.program(v.Expression)
		if err != nil {
			c.err = fmt.Errorf("spec.variables[%d].expression: %w", i, err)
			p.compiled[pol.Name] = c
			return c
		}
		c.variables = append(c.variables, compiledVariable{name: v.Name, prg: prg})
	}
	for i, v := range pol.Spec.Validations {
		cv := compiledValidation{v: v}
		var err error
		if cv.prg, err = p.program(v.Expression); err != nil {
			c.err = fmt.Errorf("spec.validations[%d].expression: %w", i, err)
			break
		}
		if v.MessageExpression != "" {
			if cv.message, err = p.program(v.MessageExpression); err != nil {
				c.err = fmt.Errorf("spec.validations[%d].messageExpression: %w", i, err)
				break
			}
		}
		c.validations = append(c.validations, cv)
	}
	p.compiled[pol.Name] = c
	return c
}

func (p *Policies) program(expr string) (cel.Program, error) {
	ast, iss := p.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return p.env.Program(ast)
}

// Validate implements Validator.
func (p *Policies) Validate(ctx context.Context, a *Attributes) error {
	bindings := p.o.Source.ValidatingAdmissionPolicyBindings()
	if len(bindings) == 0 {
		return nil
	}
	policies := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	for _, pol := range p.o.Source.ValidatingAdmissionPolicies() {
		policies[pol.Name] = pol
	}
	var vars map[string]any
	type failure struct {
		Message           string                                     `json:"message"`
		Policy            string                                     `json:"policy"`
		Binding           string                                     `json:"binding"`
		ExpressionIndex   int                                        `json:"expressionIndex"`
		ValidationActions []admissionregistrationv1.ValidationAction `json:"validationActions"`
	}
	var audits []failure
	var denied error
	for _, b := range bindings {
		pol := policies[b.Spec.PolicyName]
		if pol == nil {
			continue
		}
		ok, err := p.matches(ctx, pol, b, a)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if vars == nil {
			vars = policyVars(ctx, a, p.o.Source)
		}
		fails, err := p.evaluate(ctx, pol, b, a, vars)
		if err != nil {
			if pol.Spec.FailurePolicy != nil && *pol.Spec.FailurePolicy == admissionregistrationv1.Ignore {
				continue
			}
			fails = []evalFailure{{message: err.Error(), reason: metav1.StatusReasonInvalid}}
		}
		for _, f := range fails {
			for _, act := range b.Spec.ValidationActions {
				switch act {
				case admissionregistrationv1.Deny:
					if denied == nil {
						denied = policyDenied(a, pol.Name, b.Name, f)
					}
				case admissionregistrationv1.Warn:
					request.AddWarning(ctx, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", pol.Name, b.Name, f.message))
				case admissionregistrationv1.Audit:
					audits = append(audits, failure{Message: f.message, Policy: pol.Name, Binding: b.Name, ExpressionIndex: f.index, ValidationActions: b.Spec.ValidationActions})
				}
			}
		}
	}
	if len(audits) > 0 {
		data, _ := json.Marshal(audits)
		request.AuditFrom(ctx).AddAnnotation("validation.policy.admission.k8s.io/validation_failure", string(data))
	}
	return denied
}

type evalFailure struct {
	message string
	reason  metav1.StatusReason
	index   int
}

func policyDenied(a *Attributes, policy, binding string, f evalFailure) error {
	msg := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, f.message)
	se := apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New(msg))
	reason := f.reason
	if reason == "" {
		reason = metav1.StatusReasonInvalid
	}
	se.ErrStatus.Reason = reason
	switch reason {
	case metav1.StatusReasonForbidden:
		se.ErrStatus.Code = 403
	case metav1.StatusReasonUnauthorized:
		se.ErrStatus.Code = 401
	case metav1.StatusReasonRequestEntityTooLarge:
		se.ErrStatus.Code = 413
	default:
		se.ErrStatus.Code = 422
	}
	se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return se
}

// matches applies the policy's matchConstraints and the binding's matchResources.
func (p *Policies) matches(ctx context.Context, pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, a *Attributes) (bool, error) {
	for _, mr := range []*admissionregistrationv1.MatchResources{pol.Spec.MatchConstraints, b.Spec.MatchResources} {
		if mr == nil {
			continue
		}
		ok, err := matchResources(ctx, p.o.Source, mr, a)
		if err != nil || !ok {
			return false, err
		}
	}
	return pol.Spec.MatchConstraints != nil, nil
}

// matchResources applies one MatchResources of a validating or mutating policy or binding.
func matchResources(ctx context.Context, src Source, mr *admissionregistrationv1.MatchResources, a *Attributes) (bool, error) {
	exact := mr.MatchPolicy != nil && *mr.MatchPolicy == admissionregistrationv1.Exact
	if len(mr.ResourceRules) > 0 && !namedRulesMatch(mr.ResourceRules, a, exact) {
		return false, nil
	}
	if namedRulesMatch(mr.ExcludeResourceRules, a, exact) {
		return false, nil
	}
	if ok, err := namespaceSelectorMatches(ctx, src, mr.NamespaceSelector, a); err != nil || !ok {
		return false, err
	}
	return ObjectSelectorMatches(mr.ObjectSelector, a)
}

func namedRulesMatch(rules []admissionregistrationv1.NamedRuleWithOperations, a *Attributes, exact bool) bool {
	for _, r := range rules {
		if len(r.ResourceNames) > 0 && !containsString(r.ResourceNames, a.Name) {
			continue
		}
		if RuleMatches(r.RuleWithOperations, a, a.Namespaced, exact) {
			return true
		}
	}
	return false
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// evaluate runs the validations of one policy through one binding.
func (p *Policies) evaluate(ctx context.Context, pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, a *Attributes, vars map[string]any) ([]evalFailure, error) {
	c := p.compile(pol)
	if c.err != nil {
		return nil, fmt.Errorf("ValidatingAdmissionPolicy '%s': compilation error: %v", pol.Name, c.err)
	}
	act := vars
	if pk := pol.Spec.ParamKind; pk != nil {
		params, err := p.params(ctx, pk, b, a)
		if err != nil {
			return nil, err
		}
		if params == nil {
			// No parameter object: the binding's parameterNotFoundAction decides.
			if b.Spec.ParamRef != nil && b.Spec.ParamRef.ParameterNotFoundAction != nil && *b.Spec.ParamRef.ParameterNotFoundAction == admissionregistrationv1.AllowAction {
				return nil, nil
			}
			return []evalFailure{{message: fmt.Sprintf("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"), reason: metav1.StatusReasonInvalid}}, nil
		}
		act = make(map[string]any, len(vars)+1)
		for k, v := range vars {
			act[k] = v
		}
		act["params"] = params
	}
	if len(c.variables) > 0 {
		act = withVariables(ctx, act, c.variables)
	}
	var fails []evalFailure
	for i, v := range c.validations {
		out, _, err := v.prg.ContextEval(ctx, act)
		if err != nil {
			return nil, fmt.Errorf("ValidatingAdmissionPolicy '%s': expression '%s' resulted in error: %v", pol.Name, v.v.Expression, err)
		}
		if ok, isBool := out.Value().(bool); !isBool {
			return nil, fmt.Errorf("ValidatingAdmissionPolicy '%s': expression '%s' did not return a boolean", pol.Name, v.v.Expression)
		} else if ok {
			continue
		}
		f := evalFailure{index: i, reason: metav1.StatusReasonInvalid}
		if v.v.Reason != nil {
			f.reason = *v.v.Reason
		}
		switch {
		case v.message != nil:
			if mo, _, err := v.message.ContextEval(ctx, act); err == nil {
				if s, ok := mo.Value().(string); ok && strings.TrimSpace(s) != "" && !strings.Contains(s, "\n") {
					f.message = s
				}
			}
		}
		if f.message == "" && v.v.Message != "" {
			f.message = v.v.Message
		}
		if f.message == "" {
			f.message = "failed expression: " + strings.TrimSpace(v.v.Expression)
		}
		fails = append(fails, f)
	}
	return fails, nil
}

// withVariables returns act with "variables": each of the policy's variables evaluated in
// order, seeing the ones before it. A variable whose expression fails is left out, so that
// only an expression that uses it fails (upstream evaluates them lazily).
func withVariables(ctx context.Context, act map[string]any, vs []compiledVariable) map[string]any {
	out := make(map[string]any, len(act)+1)
	for k, v := range act {
		out[k] = v
	}
	vals := make(map[string]any, len(vs))
	out["variables"] = vals
	for _, v := range vs {
		if val, _, err := v.prg.ContextEval(ctx, out); err == nil {
			vals[v.name] = val.Value()
		}
	}
	return out
}

// params fetches the binding's parameter object.
func (p *Policies) params(ctx context.Context, pk *admissionregistrationv1.ParamKind, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, a *Attributes) (map[string]any, error) {
	ref := b.Spec.ParamRef
	if ref == nil {
		return nil, fmt.Errorf("ValidatingAdmissionPolicyBinding '%s': the policy has a paramKind but the binding has no paramRef", b.Name)
	}
	if ref.Name == "" {
		return nil, fmt.Errorf("ValidatingAdmissionPolicyBinding '%s': paramRef.selector is not supported by Kube: name the parameter object", b.Name)
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

// policyVars are the CEL variables of one request.
func policyVars(ctx context.Context, a *Attributes, src Source) map[string]any {
	vars := map[string]any{"object": nil, "oldObject": nil, "params": nil, "namespaceObject": nil}
	if a.Object != nil {
		vars["object"] = a.Object.Object
	}
	if a.OldObject != nil {
		vars["oldObject"] = a.OldObject.Object
	}
	if a.Namespace != "" {
		if ns := src.Namespace(ctx, a.Namespace); ns != nil {
			if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns); err == nil {
				vars["namespaceObject"] = m
			}
		}
	}
	req := map[string]any{
		"operation": string(a.Operation), "name": a.Name, "namespace": a.Namespace,
		"kind":        map[string]any{"group": a.Kind.Group, "version": a.Kind.Version, "kind": a.Kind.Kind},
		"resource":    map[string]any{"group": a.Resource.Group, "version": a.Resource.Version, "resource": a.Resource.Resource},
		"subResource": a.Subresource, "dryRun": a.DryRun,
	}
	if a.User != nil {
		groups := make([]any, len(a.User.Groups))
		for i, g := range a.User.Groups {
			groups[i] = g
		}
		req["userInfo"] = map[string]any{"username": a.User.Name, "uid": a.User.UID, "groups": groups}
	}
	vars["request"] = req
	return vars
}
