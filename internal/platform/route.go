package platform

import (
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerRoute registers the Route kind. (Stub: the driver is being written.)
func registerRoute(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Route]{Kind: "Route", New: func() *v1alpha1.Route { return &v1alpha1.Route{} },
		Driver: nopDriver[*v1alpha1.Route]{}, MaxConcurrentReconciles: 4})
}
