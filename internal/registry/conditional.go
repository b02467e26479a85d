package registry

// UnconditionalUpdates is implemented by strategies that decide whether an update (PUT)
// without metadata.resourceVersion may overwrite whatever is stored. A kind whose strategy
// does not implement it allows such updates, as most of upstream's built-in kinds do;
// CustomResourceDefinitions and custom resources refuse them (422 "must be specified for an
// update"), as upstream's strategies for them do.
type UnconditionalUpdates interface {
	AllowUnconditionalUpdate() bool
}

// AllowsUnconditionalUpdate says whether k takes an update without a resourceVersion.
func (k *Kind) AllowsUnconditionalUpdate() bool {
	u, ok := k.StrategyOrDefault().(UnconditionalUpdates)
	return !ok || u.AllowUnconditionalUpdate()
}
