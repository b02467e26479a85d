package platform

import (
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerRelease registers the Release kind. (Stub: the driver is being written.)
func registerRelease(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Release]{Kind: "Release", New: func() *v1alpha1.Release { return &v1alpha1.Release{} },
		Driver: nopDriver[*v1alpha1.Release]{}, MaxConcurrentReconciles: 4})
}
