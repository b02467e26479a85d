package registry

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/storage"
)

// Builtins returns a fresh definition of every built-in kind. Cheap: schemas are computed on
// first use of Kind.OpenAPISchema (or Definitions), not here.
//
// Names, short names, categories and verbs are kube-apiserver's discovery; Table columns
// follow kubectl's printers (k8s.io/kubernetes pkg/printers/internalversion); field
// selectors follow each upstream strategy's selectable fields.
func Builtins() []*Kind {
	kinds := append([]*Kind{
		// core v1
		namespaceKind(), configMapKind(), secretKind(), serviceAccountKind(), coreEventKind(),
		// events.k8s.io/v1
		eventsV1EventKind(),
		// coordination.k8s.io/v1
		leaseKind(),
		// rbac.authorization.k8s.io/v1
		roleKind(), roleBindingKind(), clusterRoleKind(), clusterRoleBindingKind(),
		// apiextensions.k8s.io/v1
		crdKind(),
		// admissionregistration.k8s.io/v1
		mutatingWebhookKind(), validatingWebhookKind(),
		validatingAdmissionPolicyKind(), validatingAdmissionPolicyBindingKind(),
	}, authzKinds()...)
	for _, more := range moreBuiltins {
		kinds = append(kinds, more()...)
	}
	return kinds
}

// moreBuiltins are the kind sets other packages add (RegisterBuiltins).
var moreBuiltins []func() []*Kind

// RegisterBuiltins adds a set of built-in kinds defined by another package (the workload
// kinds, built from upstream's code, which this package must not import). It must be called
// from that package's init, before Builtins or Definitions is first called.
func RegisterBuiltins(kinds func() []*Kind) { moreBuiltins = append(moreBuiltins, kinds) }

// builtinTypes is every built-in kind's Go types; Definitions is generated from it.
func builtinTypes() []typedKind {
	var out []typedKind
	for _, k := range Builtins() {
		var list runtime.Object
		if k.NewTypedList != nil { // computed kinds have no list
			list = k.NewTypedList()
		}
		out = append(out, typedKind{group: k.Group, version: k.Version, kind: k.Kind, obj: k.NewTyped(), list: list})
	}
	return out
}

// kindBase fills the parts every built-in kind shares: names from the Go types, the lazily
// computed schema.
func kindBase[T, L runtime.Object](group, version, resource, singular string, newObj func() T, newList func() L) Kind {
	obj := newObj()
	t := indirectType(reflect.TypeOf(obj))
	return Kind{
		Group: group, Version: version,
		Kind: t.Name(), ListKind: indirectType(reflect.TypeOf(newList())).Name(),
		Resource: resource, Singular: singular,
		NewTyped:     func() runtime.Object { return newObj() },
		NewTypedList: func() runtime.Object { return newList() },
		SchemaName:   typeName(t),
		SchemaFunc: func() *spec.Schema {
			s := Definitions()[typeName(t)]
			return &s
		},
	}
}

// withFields extends the default selectable fields (metadata.name, metadata.namespace).
func withFields(extra func(obj *unstructured.Unstructured, f fields.Set)) storage.AttrFunc {
	return func(obj *unstructured.Unstructured) (labels.Set, fields.Set) {
		l, f := storage.DefaultAttrs(obj)
		extra(obj, f)
		return l, f
	}
}

// readVerbs and the like narrow AllVerbs for the resources kube-apiserver narrows.
var verbsNoDeleteCollection = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

// TypedKind is the base of a built-in kind defined outside this package: names and the
// lazily computed schema from its Go types, as kindBase fills them.
func TypedKind(group, version, resource, singular string, newObj, newList func() runtime.Object) Kind {
	t := indirectType(reflect.TypeOf(newObj()))
	return Kind{
		Group: group, Version: version,
		Kind: t.Name(), ListKind: indirectType(reflect.TypeOf(newList())).Name(),
		Resource: resource, Singular: singular,
		NewTyped:     newObj,
		NewTypedList: newList,
		SchemaName:   typeName(t),
		SchemaFunc: func() *spec.Schema {
			s := Definitions()[typeName(t)]
			return &s
		},
	}
}
