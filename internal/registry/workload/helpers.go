package workload

import (
	"context"
	"errors"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// labelSelector is status.selector of a Scale for kinds whose spec.selector is a
// LabelSelector (Deployments, ReplicaSets, StatefulSets), as upstream's scale REST renders it.
func labelSelector(obj *unstructured.Unstructured) string {
	m, ok, _ := unstructured.NestedMap(obj.Object, "spec", "selector")
	if !ok {
		return ""
	}
	var ls metav1.LabelSelector
	if err := runtimeFromUnstructured(m, &ls); err != nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return ""
	}
	return sel.String()
}

// mapSelector is status.selector of a ReplicationController's Scale: its spec.selector map.
func mapSelector(obj *unstructured.Unstructured) string {
	m, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector")
	return labels.SelectorFromSet(m).String()
}

// convertFrom turns stored objects (version from) into version to.
func convertFrom(from, to schema.GroupVersionKind) func(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	return func(_ context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
		out := make([]*unstructured.Unstructured, len(objs))
		for i, o := range objs {
			if o.GetAPIVersion() == to.GroupVersion().String() {
				out[i] = o
				continue
			}
			m, err := convert(o.Object, from, to)
			if err != nil {
				return nil, err
			}
			out[i] = &unstructured.Unstructured{Object: m}
		}
		return out, nil
	}
}

// convertTo turns a validated object of version from into the storage version to.
func convertTo(from, to schema.GroupVersionKind) func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return func(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		m, err := convert(obj.Object, from, to)
		if err != nil {
			return nil, err
		}
		return &unstructured.Unstructured{Object: m}, nil
	}
}

// namespaces is the namespace client upstream's resource claim strategies read namespace
// labels with (admin access); SetNamespaceClient gives it its client.
var namespaces = &lazyNamespaces{}

type lazyNamespaces struct {
	corev1client.NamespaceInterface // nil: only Get is used
	client                          atomic.Pointer[corev1client.NamespaceInterface]
}

func (n *lazyNamespaces) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error) {
	c := n.client.Load()
	if c == nil {
		return nil, errors.New("namespaces cannot be read yet")
	}
	return (*c).Get(ctx, name, opts)
}

// SetNamespaceClient gives the resource claim strategies the client they read namespaces
// with.
func SetNamespaceClient(c corev1client.NamespaceInterface) { namespaces.client.Store(&c) }

// signerAuthorizer answers upstream's PodCertificateRequest status strategy, which asks
// whether the writer may "sign" for the request's signer, with the server's authorizer
// (SetAuthorizer); until it is set, it denies.
type signerAuthorizer struct{}

// Authorize is a decision of the server's authorizer: allowed or not.
type Authorize func(ctx context.Context, a authorizer.Attributes) bool

var authorize atomic.Pointer[Authorize]

// SetAuthorizer gives the strategies that authorize within a write (a PodCertificateRequest's
// signer) the server's authorizer.
func SetAuthorizer(f Authorize) { authorize.Store(&f) }

func (signerAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if f := authorize.Load(); f != nil && (*f)(ctx, a) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}
