package platform

import (
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerComponent registers the Component kind. (Stub: the driver is being written.)
func registerComponent(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Component]{Kind: "Component", New: func() *v1alpha1.Component { return &v1alpha1.Component{} },
		Driver: nopDriver[*v1alpha1.Component]{}, MaxConcurrentReconciles: 4})
}
