package platform

import (
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerVolume registers the Volume kind. (Stub: the driver is being written.)
func registerVolume(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Volume]{Kind: "Volume", New: func() *v1alpha1.Volume { return &v1alpha1.Volume{} },
		Driver: nopDriver[*v1alpha1.Volume]{}, MaxConcurrentReconciles: 4})
}
