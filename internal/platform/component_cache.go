package platform

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// componentReads is where the Component driver reads: the platform's informer cache
// (Options.Cache: the lifecycle cache once it has synced, the direct client before) for
// what Components own, their Applications and Volumes, and pods; the
// direct client for the rest (data services' objects; connection Secrets, as the lifecycle
// cache holds only kube-system's server entries among Secrets).
//
// A cache read is checked against the newest event the engine's own informers delivered
// for the object (record, called from the kind's Watches — which also enqueue the
// Component, so the reconcile an event starts finds its version recorded). The two
// informers are distinct: a reconcile started by the engine's may run before the cache
// has caught up. Releases are listed (the one naming the Component): the list is checked
// against the newest events of the Releases naming it (recordRelease). When the cached object's resourceVersion is not the one the newest event
// carried (the cache lags, or the event was a deletion), the object is read directly; the
// driver never decides on an older version of an object than the one that woke it.
type componentReads struct {
	cache  func() client.Reader
	direct client.Client
	// seen maps componentKey → the resourceVersion of the newest event for that object.
	seen sync.Map
	// releases maps "namespace/component" → Release name → the resourceVersion of the
	// newest event of a Release naming that Component (releasesOf's freshness check).
	mu       sync.Mutex
	releases map[string]map[string]string
	// wrote maps componentKey → the resourceVersion the driver's own apply answered: the
	// event of that version is the echo of a write whose pass already read the answer
	// (ownerMap records it without reconciling the Component again).
	wrote sync.Map
}

func componentKey(gvk schema.GroupVersionKind, ns, name string) string {
	return gvk.Kind + "." + gvk.Group + "/" + ns + "/" + name
}

func (r *componentReads) gvk(obj client.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, r.direct.Scheme())
}

// record notes an event's object: its version is the least a read of it may return.
func (r *componentReads) record(obj client.Object) {
	if gvk, err := r.gvk(obj); err == nil {
		r.seen.Store(componentKey(gvk, obj.GetNamespace(), obj.GetName()), obj.GetResourceVersion())
	}
}

// ownerMap is KindOptions.Owns' mapping (an owned object's change reconciles the
// Component that controls it), recording the event's version first.
func (r *componentReads) ownerMap(_ context.Context, obj client.Object) []types.NamespacedName {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Component" || ref.APIVersion != v1alpha1.GroupVersion.String() {
		return nil
	}
	r.record(obj)
	if gvk, err := r.gvk(obj); err == nil {
		if r.wrote.CompareAndDelete(componentKey(gvk, obj.GetNamespace(), obj.GetName()), obj.GetResourceVersion()) {
			return nil // the echo of the driver's own apply
		}
	}
	return []types.NamespacedName{{Namespace: obj.GetNamespace(), Name: ref.Name}}
}

// applied notes the answer to the driver's apply of an owned object (see wrote). A no-op
// apply answers the version already stored, whose event has come and gone: it is not
// noted, or it would swallow a later event of the same version (a relist).
// liveVersion is the resourceVersion of the object the apply was computed against ("":
// none).
func (r *componentReads) applied(liveVersion string, answer client.Object) {
	rv := answer.GetResourceVersion()
	if rv == "" || rv == liveVersion {
		return
	}
	if gvk, err := r.gvk(answer); err == nil {
		r.wrote.Store(componentKey(gvk, answer.GetNamespace(), answer.GetName()), rv)
	}
}

// get reads the object key into obj (typed, or unstructured with its kind set): from the
// cache when it holds the newest event's version, else directly. found is false when it
// does not exist.
func (r *componentReads) get(ctx context.Context, key client.ObjectKey, obj client.Object) (found bool, err error) {
	gvk, err := r.gvk(obj)
	if err != nil {
		return false, err
	}
	k := componentKey(gvk, key.Namespace, key.Name)
	want, seen := r.seen.Load(k)
	err = r.cache().Get(ctx, key, obj)
	switch {
	case err == nil && (!seen || obj.GetResourceVersion() == want):
		return true, nil
	case apierrors.IsNotFound(err) && !seen:
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read %s %s: %w", gvk.Kind, key.Name, err)
	}
	// The cache is behind the events (or the object was deleted): read it directly.
	if err := r.direct.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.seen.CompareAndDelete(k, want)
			return false, nil
		}
		return false, fmt.Errorf("read %s %s: %w", gvk.Kind, key.Name, err)
	}
	return true, nil
}

// created notes the answer to the driver's write of an owned object not seen yet: the
// pass the Component's own write brings (its finalizer) may run before the cache has the
// object, and would take it for absent. An object already seen keeps the version of its
// newest event (the write's event is still to come, or already recorded).
func (r *componentReads) created(obj client.Object) {
	if gvk, err := r.gvk(obj); err == nil && obj.GetResourceVersion() != "" {
		r.seen.LoadOrStore(componentKey(gvk, obj.GetNamespace(), obj.GetName()), obj.GetResourceVersion())
	}
}

// recordRelease notes an event of a Release: the Component it names must see it.
func (r *componentReads) recordRelease(rel *v1alpha1.Release) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.releases == nil {
		r.releases = map[string]map[string]string{}
	}
	key := rel.Namespace + "/" + rel.Spec.Component
	if r.releases[key] == nil {
		r.releases[key] = map[string]string{}
	}
	r.releases[key][rel.Name] = rel.ResourceVersion
}

// releasesOf lists the Releases of namespace ns from the cache, or directly when the
// cache has not caught up with the newest event of a Release naming component.
func (r *componentReads) releasesOf(ctx context.Context, ns, component string) ([]v1alpha1.Release, error) {
	var l v1alpha1.ReleaseList
	if err := r.cache().List(ctx, &l, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list Releases: %w", err)
	}
	cached := make(map[string]string, len(l.Items))
	for _, rel := range l.Items {
		cached[rel.Name] = rel.ResourceVersion
	}
	key := ns + "/" + component
	r.mu.Lock()
	fresh := true
	for name, rv := range r.releases[key] {
		if cached[name] != rv {
			fresh = false
		}
	}
	r.mu.Unlock()
	if fresh {
		return l.Items, nil
	}
	l = v1alpha1.ReleaseList{}
	if err := r.direct.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list Releases: %w", err)
	}
	// What the API says is the newest: Releases gone or naming another Component are
	// forgotten.
	now := map[string]string{}
	for _, rel := range l.Items {
		if rel.Spec.Component == component {
			now[rel.Name] = rel.ResourceVersion
		}
	}
	r.mu.Lock()
	r.releases[key] = now
	r.mu.Unlock()
	return l.Items, nil
}

// forget drops what is recorded of an object the driver deleted.
func (r *componentReads) forget(obj client.Object) {
	if gvk, err := r.gvk(obj); err == nil {
		k := componentKey(gvk, obj.GetNamespace(), obj.GetName())
		r.seen.Delete(k)
		r.wrote.Delete(k)
	}
}
