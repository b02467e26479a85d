package crd

// AllowUnconditionalUpdate is false: an update of a custom resource must name the
// resourceVersion it replaces, as upstream's custom resource strategy requires.
func (vs *version) AllowUnconditionalUpdate() bool { return false }
