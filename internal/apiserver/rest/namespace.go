package rest

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/storage"
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// checkNamespaceLifecycle refuses new content in a namespace that does not exist or is being
// deleted, as kube-apiserver's NamespaceLifecycle admission does.
func (c *call) checkNamespaceLifecycle(ns string) error {
	if ns == "" || !c.kind.Namespaced {
		return nil
	}
	nsKind, ok := c.h.reg.Lookup(namespacesGVR)
	if !ok {
		return nil
	}
	key := nsKind.Key("", ns)
	obj, err := c.h.caches.Get(nsKind.Prefix(), nsKind.AttrFunc()).Get(c.ctx, key, 0)
	if errors.Is(err, storage.ErrNotFound) {
		// The cache may lag a namespace created a moment ago: ask etcd.
		obj, err = c.h.store.Get(c.ctx, key)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return apierrors.NewNotFound(namespacesGVR.GroupResource(), ns)
	}
	if err != nil {
		return statusError(err, namespacesGVR.GroupResource(), ns)
	}
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	if obj.GetDeletionTimestamp() != nil || phase == "Terminating" {
		se := apierrors.NewForbidden(c.gr, c.info.Name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, causeNamespaceTerminating(ns))
		return se
	}
	return nil
}
