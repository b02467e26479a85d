package workload

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

// Deps are what the subresources that act on other objects need: binding writes the pod
// in storage; eviction reads disruption budgets and deletes the pod through the API (so the
// delete is graceful, admitted and audited as any other).
type Deps struct {
	Store *storage.Store
	// Client is a loopback client with the server's own authority.
	Client kubernetes.Interface
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Wire adds to the registry's workload kinds the subresources that need d: pods/binding,
// pods/eviction and the bindings resource.
func Wire(reg *registry.Registry, d *Deps) {
	pods, ok := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	if !ok {
		return
	}
	if pods.Subresources == nil {
		pods.Subresources = map[string]*registry.Subresource{}
	}
	pods.Subresources["binding"] = &registry.Subresource{Version: "v1", Kind: "Binding",
		NewTyped: func() runtime.Object { return &corev1.Binding{} }, Create: d.bind}
	pods.Subresources["eviction"] = &registry.Subresource{Group: "policy", Version: "v1", Kind: "Eviction",
		NewTyped: func() runtime.Object { return &policyv1.Eviction{} }, Create: d.evict}
	reg.Add(bindingsKind(d))
}

// bindingsKind is the legacy bindings resource: POST /api/v1/namespaces/<ns>/bindings with a
// Binding named after the pod.
func bindingsKind(d *Deps) *registry.Kind {
	k := registry.TypedKind("", "v1", "bindings", "binding", func() runtime.Object { return &corev1.Binding{} }, func() runtime.Object { return &corev1.List{} })
	k.ListKind = ""
	k.NewTypedList = nil
	k.Namespaced = true
	k.Verbs = []string{"create"}
	k.Create = func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return d.bind(ctx, obj.GetNamespace(), obj.GetName(), obj)
	}
	return &k
}
