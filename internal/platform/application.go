package platform

import (
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerApplication registers the Application kind. (Stub: the driver is being written.)
func registerApplication(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Application]{Kind: "Application", New: func() *v1alpha1.Application { return &v1alpha1.Application{} },
		Driver: nopDriver[*v1alpha1.Application]{}, MaxConcurrentReconciles: 4})
}
