package lifecycle

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Change is a kind of change to an object, as the watch filter sees it.
type Change uint8

// The changes a Filter may select.
const (
	// ChangeCreate: the object appeared (also every object on a resync or restart).
	ChangeCreate Change = 1 << iota
	// ChangeGeneration: the spec changed (metadata.generation moved).
	ChangeGeneration
	// ChangeMetadata: labels, annotations, finalizers, owner references or the deletion
	// timestamp changed.
	ChangeMetadata
	// ChangeDelete: the object is gone.
	ChangeDelete

	// ChangeAll selects every change (the default).
	ChangeAll = ChangeCreate | ChangeGeneration | ChangeMetadata | ChangeDelete
)

// Filter selects the objects and the changes that start a reconcile. A status write never
// does: it moves neither the generation nor the metadata, so an object's own status write
// cannot trigger its reconcile (no reconcile storms).
type Filter struct {
	// LabelSelector selects objects by label (nil: all).
	LabelSelector labels.Selector
	// Namespaces selects namespaced objects by namespace (empty: all).
	Namespaces []string
	// Changes selects change types (0: ChangeAll).
	Changes Change
}

// UpdateChange classifies an update: generation before metadata; ok is false when only the
// status, resourceVersion or managedFields moved.
func UpdateChange(old, cur client.Object) (c Change, ok bool) {
	switch {
	case old.GetGeneration() != cur.GetGeneration():
		return ChangeGeneration, true
	case !old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp()),
		!slices.Equal(old.GetFinalizers(), cur.GetFinalizers()),
		!maps.Equal(old.GetLabels(), cur.GetLabels()),
		!maps.Equal(old.GetAnnotations(), cur.GetAnnotations()),
		len(old.GetOwnerReferences()) != len(cur.GetOwnerReferences()):
		return ChangeMetadata, true
	}
	return 0, false
}

// Accepts reports whether a change c to obj passes the filter.
func (f Filter) Accepts(c Change, obj client.Object) bool {
	changes := f.Changes
	if changes == 0 {
		changes = ChangeAll
	}
	if changes&c == 0 {
		return false
	}
	if len(f.Namespaces) > 0 && obj.GetNamespace() != "" && !slices.Contains(f.Namespaces, obj.GetNamespace()) {
		return false
	}
	return f.LabelSelector == nil || f.LabelSelector.Matches(labels.Set(obj.GetLabels()))
}

// Predicate is the filter as a controller-runtime predicate.
func (f Filter) Predicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return f.Accepts(ChangeCreate, e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			c, ok := UpdateChange(e.ObjectOld, e.ObjectNew)
			return ok && f.Accepts(c, e.ObjectNew)
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return f.Accepts(ChangeDelete, e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return true },
	}
}

// ownFinalizerEcho drops the update that only added the engine's Finalizer — the echo of
// the engine's own write: the pass that wrote it drives the object on in the same
// reconcile (and requeues itself when that fails), so reconciling the echo would only look
// again at what that pass has just done — a second pass, often a status write of its own,
// and a conflict when the cache has not yet seen the first pass's status write. Any other
// change in the same event (generation, labels, annotations, owners, deletion, other
// finalizers) lets it through.
func ownFinalizerEcho() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !finalizerAddedOnly(e.ObjectOld, e.ObjectNew) }}
}

// finalizerAddedOnly reports whether cur is old with the engine's Finalizer added and
// nothing else of what UpdateChange looks at changed.
func finalizerAddedOnly(old, cur client.Object) bool {
	if old == nil || cur == nil || containsFinalizer(old) || !containsFinalizer(cur) {
		return false
	}
	rest := slices.DeleteFunc(slices.Clone(cur.GetFinalizers()), func(f string) bool { return f == Finalizer })
	return slices.Equal(old.GetFinalizers(), rest) && old.GetGeneration() == cur.GetGeneration() &&
		old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp()) &&
		maps.Equal(old.GetLabels(), cur.GetLabels()) && maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) &&
		slices.EqualFunc(old.GetOwnerReferences(), cur.GetOwnerReferences(), func(a, b metav1.OwnerReference) bool { return a.UID == b.UID && a.Name == b.Name })
}

type (
	eventCreate = event.CreateEvent
	eventUpdate = event.UpdateEvent
	eventDelete = event.DeleteEvent
)
