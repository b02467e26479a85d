package workload

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/deprecation"

	"kubeos.dev/kube/internal/registry"
)

func init() { registry.RegisterBuiltins(componentStatusKinds) }

// componentStatusKinds is core/v1 ComponentStatus (`kubectl get componentstatuses`, `cs`),
// deprecated since v1.19 and still served by kube-apiserver v1.37: get and list only, every
// response with upstream's deprecation warning, the Table from upstream's printer (NAME
// STATUS MESSAGE ERROR). Its objects are computed on every read and never stored: the
// server sets Kind.Read (internal/server/componentstatus.go).
func componentStatusKinds() []*registry.Kind {
	k := registry.TypedKind("", "v1", "componentstatuses", "componentstatus",
		func() runtime.Object { return &corev1.ComponentStatus{} },
		func() runtime.Object { return &corev1.ComponentStatusList{} })
	k.ShortNames = []string{"cs"}
	k.Verbs = []string{"get", "list"}
	k.TableRows = tableRows(k.GVK())
	k.DeprecationWarning = deprecation.WarningMessage(&corev1.ComponentStatus{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ComponentStatus"}})
	return []*registry.Kind{&k}
}
