package storage

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// AttrFunc returns the labels of an object and the fields a field selector may name.
type AttrFunc func(obj *unstructured.Unstructured) (labels.Set, fields.Set)

// Predicate selects objects by label and field selectors. The zero value matches everything.
type Predicate struct {
	Label labels.Selector
	Field fields.Selector
	// Attrs extracts the selectable fields; nil means DefaultAttrs.
	Attrs AttrFunc
}

// Empty reports whether the predicate matches every object.
func (p Predicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// Matches reports whether obj passes both selectors. A nil object never matches.
func (p Predicate) Matches(obj *unstructured.Unstructured) bool {
	if obj == nil {
		return false
	}
	if p.Empty() {
		return true
	}
	attrs := p.Attrs
	if attrs == nil {
		attrs = DefaultAttrs
	}
	l, f := attrs(obj)
	if p.Label != nil && !p.Label.Empty() && !p.Label.Matches(l) {
		return false
	}
	if p.Field != nil && !p.Field.Empty() && !p.Field.Matches(f) {
		return false
	}
	return true
}

// DefaultAttrs offers metadata.name and metadata.namespace, which every resource supports.
func DefaultAttrs(obj *unstructured.Unstructured) (labels.Set, fields.Set) {
	return labels.Set(obj.GetLabels()), fields.Set{
		"metadata.name":      obj.GetName(),
		"metadata.namespace": obj.GetNamespace(),
	}
}
