package cli

import "strconv"

// invertedBool is a boolean flag that stores its negation (--enable-x sets Disable X to
// false), so that the zero value of the option keeps the feature on.
type invertedBool struct{ disabled *bool }

func (b invertedBool) String() string {
	if b.disabled == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.disabled)
}

func (b invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.disabled = !v
	return nil
}

func (invertedBool) Type() string { return "bool" }
