package workload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationinstall "k8s.io/kube-aggregator/pkg/apis/apiregistration/install"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	// Every group this package serves, registered in legacyscheme with its internal types,
	// conversions and defaults.
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/certificates/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/node/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
	_ "k8s.io/kubernetes/pkg/apis/storagemigration/install"
)

// scheme is upstream's: internal and versioned types, conversions, defaulting functions.
var scheme = legacyscheme.Scheme

// kube-aggregator registers apiregistration.k8s.io in a scheme of its own; Kube serves it
// beside the other groups, from the same scheme.
func init() { apiregistrationinstall.Install(scheme) }

// external decodes an unstructured object into its versioned Go type (gvk's).
func external(u map[string]any, gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// toInternal decodes an unstructured object of version gvk into upstream's internal type.
func toInternal(u map[string]any, gvk schema.GroupVersionKind) (runtime.Object, error) {
	return toInternalWith(u, gvk, false)
}

// toInternalDefaulted is toInternal with upstream's defaulting functions applied to the
// versioned object first.
func toInternalDefaulted(u map[string]any, gvk schema.GroupVersionKind) (runtime.Object, error) {
	return toInternalWith(u, gvk, true)
}

func toInternalWith(u map[string]any, gvk schema.GroupVersionKind, defaults bool) (runtime.Object, error) {
	ext, err := external(u, gvk)
	if err != nil {
		return nil, err
	}
	if defaults {
		scheme.Default(ext)
	}
	in, err := scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return nil, err
	}
	if err := scheme.Convert(ext, in, nil); err != nil {
		return nil, err
	}
	return in, nil
}

// versionedToInternal converts a typed object of version gvk to its internal type; nil when
// it does not convert (the caller decodes the content instead).
func versionedToInternal(ext runtime.Object, gvk schema.GroupVersionKind) runtime.Object {
	in, err := scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil || scheme.Convert(ext, in, nil) != nil {
		return nil
	}
	return in
}

// fromInternal encodes an internal object as an unstructured object of version gvk.
func fromInternal(in runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	ext, err := defaultedExternal(in, gvk)
	if err != nil {
		return nil, err
	}
	return toUnstructured(ext, gvk)
}

// defaultedExternal converts an internal object to version gvk, with its defaults.
func defaultedExternal(in runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	ext, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := scheme.Convert(in, ext, nil); err != nil {
		return nil, err
	}
	// kube-apiserver defaults every object it decodes, from storage too: what a strategy
	// cleared after the request was defaulted (a PVC's status on create) is served with its
	// defaults (phase Pending), so it is stored with them here.
	scheme.Default(ext)
	return ext, nil
}

func toUnstructured(ext runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ext)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}

// defaulted applies upstream's defaulting functions for gvk to u, as kube-apiserver's decoder
// does to every object it reads from a request, and returns the typed object u's new content
// was made from. An object that does not decode is left unchanged (nil): validation reports
// why.
func defaulted(u *unstructured.Unstructured, gvk schema.GroupVersionKind) runtime.Object {
	ext := defaultedTyped(u, gvk)
	if ext == nil {
		return nil
	}
	m, err := toUnstructured(ext, gvk)
	if err != nil {
		return nil
	}
	u.Object = m
	return ext
}

// defaultedTyped is defaulted without writing the defaults back into u: for a caller that
// replaces u's content from the typed object afterwards anyway (a subresource's validation,
// which encodes what it validated).
func defaultedTyped(u *unstructured.Unstructured, gvk schema.GroupVersionKind) runtime.Object {
	ext, err := external(u.Object, gvk)
	if err != nil {
		return nil
	}
	scheme.Default(ext)
	return ext
}

// convert turns an object stored in one version of a group kind into another version,
// through the internal type, as kube-apiserver serves one stored object in several versions.
func convert(u map[string]any, from, to schema.GroupVersionKind) (map[string]any, error) {
	in, err := toInternal(u, from)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", from, err)
	}
	return fromInternal(in, to)
}

func runtimeFromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}
