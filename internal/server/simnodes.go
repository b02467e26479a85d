package server

// SimNodeOptions configure simulated nodes (internal/simnode).
type SimNodeOptions struct{}

func (o *SimNodeOptions) validate() error { return nil }

// simNodeControllers are elected controllers of simulated nodes (internal/simnode); startElectedControllers runs them
// after electedControllers.
var simNodeControllers []electedController
