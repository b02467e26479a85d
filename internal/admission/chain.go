package admission

import "context"

// Mutator is a mutating admission plugin.
type Mutator interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Validator is a validating admission plugin.
type Validator interface {
	Validate(ctx context.Context, a *Attributes) error
}

// Chain is the admission chain in kube-apiserver's order: its mutating plugins (built-in
// ones first, then the mutating webhooks) in Admit, its validating plugins (built-in ones
// first, then validating admission policies and the validating webhooks) in Validate. The
// first refusal ends the chain.
type Chain struct {
	Mutating   []Mutator
	Validating []Validator
}

var _ Interface = (*Chain)(nil)

// Admit implements Interface.
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	for _, m := range c.Mutating {
		if err := m.Admit(ctx, a); err != nil {
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
