package admission

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Mutator is a mutating admission plugin.
type Mutator interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Reinvoker is a mutating plugin that runs again when the plugins after it changed the
// object (upstream's reinvocationPolicy IfNeeded).
type Reinvoker interface {
	Mutator
	// Reinvocable says some of its configuration asks for reinvocation (so the chain keeps
	// a copy of the object to tell whether the later plugins changed it).
	Reinvocable() bool
	Reinvoke(ctx context.Context, a *Attributes) error
}

// Validator is a validating admission plugin.
type Validator interface {
	Validate(ctx context.Context, a *Attributes) error
}

// Chain is the admission chain in kube-apiserver's order: its mutating plugins (built-in
// ones first, then mutating admission policies, then the mutating webhooks, then a second
// run of the policies that ask for it when the webhooks changed the object) in Admit, its validating plugins (built-in ones
// first, then validating admission policies and the validating webhooks) in Validate. The
// first refusal ends the chain.
type Chain struct {
	Mutating   []Mutator
	Validating []Validator
}

var _ Interface = (*Chain)(nil)

// Admit implements Interface.
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	var (
		again []Reinvoker
		after *unstructured.Unstructured
	)
	for _, m := range c.Mutating {
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
		if r, ok := m.(Reinvoker); ok && a.Object != nil && r.Reinvocable() {
			again = append(again, r)
			after = a.Object.DeepCopy()
		}
	}
	if after == nil || apiequality.Semantic.DeepEqual(after.Object, a.Object.Object) {
		return nil
	}
	for _, r := range again {
		if err := r.Reinvoke(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Interface.
func (c *Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, v := range c.Validating {
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
