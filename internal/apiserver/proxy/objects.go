package proxy

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/storage"
)

// Objects reads what the connect subresources need. Errors for a missing object must be
// API NotFound errors (apierrors.NewNotFound with the object's resource), as a client sees
// them; other errors answer 500.
type Objects interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	// EndpointSlices returns the slices of a service (label kubernetes.io/service-name).
	EndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error)
}

// Store is the part of *storage.Store that StoreObjects reads.
type Store interface {
	Get(ctx context.Context, key string) (*unstructured.Unstructured, error)
	List(ctx context.Context, prefix string, o storage.ListOptions) (*storage.ListResult, error)
}

var _ Store = (*storage.Store)(nil)

// StoreObjects reads the objects from storage, one read per request (a connect request is
// rare next to the work it starts, and reads its pod as the kubelet will see it).
type StoreObjects struct{ Store Store }

var _ Objects = StoreObjects{}

var (
	podsResource      = corev1.Resource("pods")
	nodesResource     = corev1.Resource("nodes")
	servicesResource  = corev1.Resource("services")
	slicesGroupPrefix = discoveryv1.SchemeGroupVersion.Group
)

// Pod implements Objects.
func (s StoreObjects) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	var pod corev1.Pod
	return &pod, s.get(ctx, podsResource, namespace, name, &pod)
}

// Node implements Objects.
func (s StoreObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	var node corev1.Node
	return &node, s.get(ctx, nodesResource, "", name, &node)
}

// Service implements Objects.
func (s StoreObjects) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	var svc corev1.Service
	return &svc, s.get(ctx, servicesResource, namespace, name, &svc)
}

// EndpointSlices implements Objects.
func (s StoreObjects) EndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error) {
	res, err := s.Store.List(ctx, storage.NamespacePrefix(slicesGroupPrefix, "endpointslices", namespace), storage.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*discoveryv1.EndpointSlice
	for _, u := range res.Items {
		if u.GetLabels()[discoveryv1.LabelServiceName] != service {
			continue
		}
		var slice discoveryv1.EndpointSlice
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &slice); err != nil {
			return nil, err
		}
		out = append(out, &slice)
	}
	return out, nil
}

func (s StoreObjects) get(ctx context.Context, gr schema.GroupResource, namespace, name string, into any) error {
	u, err := s.Store.Get(ctx, storage.Key(gr.Group, gr.Resource, namespace, name))
	if errors.Is(err, storage.ErrNotFound) {
		return apierrors.NewNotFound(gr, name)
	}
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}
