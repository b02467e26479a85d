package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

// cachePods is the built-in admission plugins' view of pods (builtin.PodSource): the pods
// watch cache the API serves from, decoded on each read, instead of an informer holding a
// typed copy of every pod. The plugins read pods rarely (a node's eviction, delete or token
// request; a namespace's label change).
type cachePods struct{ s *Server }

// cachePodsTimeout bounds a read that waits for the pod cache to become ready.
const cachePodsTimeout = 30 * time.Second

func (p cachePods) cache() (*registry.Kind, *watchcache.Cache, error) {
	k, ok := p.s.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok || p.s.caches == nil {
		return nil, nil, errors.New("pods are not served")
	}
	return k, p.s.caches.Get(k.Prefix(), k.AttrFunc()), nil
}

// GetPod implements builtin.PodSource.
func (p cachePods) GetPod(namespace, name string) (*corev1.Pod, error) {
	k, c, err := p.cache()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cachePodsTimeout)
	defer cancel()
	u, err := c.Get(ctx, k.Key(namespace, name), 0)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
		return nil, fmt.Errorf("decoding pod %s/%s: %w", namespace, name, err)
	}
	return pod, nil
}

// ListPods implements builtin.PodSource.
func (p cachePods) ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	k, c, err := p.cache()
	if err != nil {
		return nil, err
	}
	prefix := k.Prefix()
	if namespace != "" {
		prefix = k.Key(namespace, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cachePodsTimeout)
	defer cancel()
	res, err := c.List(ctx, prefix, watchcache.ListOptions{Predicate: storage.Predicate{Label: selector}})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(res.Items))
	for _, u := range res.Items {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
			return nil, fmt.Errorf("decoding pod %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, pod)
	}
	return out, nil
}
