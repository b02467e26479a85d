package registry

import (
	"context"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CRDCleanupFinalizer holds a deleted CRD until its custom resources are gone.
const CRDCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// crdStrategy defaults CRDs as apiextensions.k8s.io/v1 does (listKind, singular,
// conversion None, storedVersions), gives new ones the cleanup finalizer, and validates them
// with upstream's apiextensions validation on the internal type, so that invalid CRDs get
// the same 422 causes as from kube-apiserver (names, structural schema, CEL rules and
// their cost).
type crdStrategy struct{}

var (
	_ Strategy        = crdStrategy{}
	_ StatusValidator = crdStrategy{}
)

// decodeCRD decodes and defaults obj.
func decodeCRD(obj *unstructured.Unstructured) (*apiextensionsv1.CustomResourceDefinition, field.ErrorList) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if errs := decode(obj, crd); len(errs) > 0 {
		return nil, errs
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd, nil
}

// encodeInto replaces obj's content by crd's, keeping what the handler set.
func encodeInto(obj *unstructured.Unstructured, crd *apiextensionsv1.CustomResourceDefinition) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return
	}
	apiVersion, kind := obj.GetAPIVersion(), obj.GetKind()
	obj.Object = m
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
}

// addStorageVersion records the storage version in status.storedVersions, as upstream's
// strategy does on every create and update.
func addStorageVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		for _, s := range crd.Status.StoredVersions {
			if s == v.Name {
				return
			}
		}
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		return
	}
}

func (crdStrategy) PrepareForCreate(obj *unstructured.Unstructured) {
	crd, errs := decodeCRD(obj)
	if len(errs) > 0 {
		return // Validate reports them
	}
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	addStorageVersion(crd)
	has := false
	for _, f := range crd.Finalizers {
		has = has || f == CRDCleanupFinalizer
	}
	if !has {
		crd.Finalizers = append(crd.Finalizers, CRDCleanupFinalizer)
	}
	encodeInto(obj, crd)
}

// AllowUnconditionalUpdate is false: a CRD update must name the resourceVersion it
// replaces, as upstream's CRD strategy requires.
func (crdStrategy) AllowUnconditionalUpdate() bool { return false }

func (crdStrategy) PrepareForUpdate(obj, _ *unstructured.Unstructured) {
	crd, errs := decodeCRD(obj)
	if len(errs) > 0 {
		return
	}
	addStorageVersion(crd)
	encodeInto(obj, crd)
}

// toInternal converts a v1 CRD to the internal type upstream validation works on.
// internalCRD decodes obj and converts it to the internal type upstream's validation takes.
func internalCRD(obj *unstructured.Unstructured) (*apiextensions.CustomResourceDefinition, field.ErrorList) {
	crd, errs := decodeCRD(obj)
	if len(errs) > 0 {
		return nil, errs
	}
	return toInternal(crd)
}

func toInternal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, field.ErrorList) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	return out, nil
}

func (crdStrategy) Validate(obj *unstructured.Unstructured) field.ErrorList {
	in, errs := internalCRD(obj)
	if len(errs) > 0 {
		return errs
	}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), in)
}

func (crdStrategy) ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	in, errs := internalCRD(obj)
	if len(errs) > 0 {
		return errs
	}
	oldIn, errs := internalCRD(old)
	if len(errs) > 0 {
		return crdvalidation.ValidateCustomResourceDefinition(context.Background(), in)
	}
	return crdvalidation.ValidateCustomResourceDefinitionUpdate(context.Background(), in, oldIn)
}

// withoutSpec is a shallow view of a CRD without its spec: what status validation reads,
// without decoding and converting the schemas (most of a CRD) on every status write.
func withoutSpec(obj *unstructured.Unstructured) *unstructured.Unstructured {
	view := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if k != "spec" {
			view[k] = v
		}
	}
	return &unstructured.Unstructured{Object: view}
}

// ValidateStatusUpdate checks a write to the status subresource as upstream's CRD status
// strategy does: metadata and status only (the spec is the stored one).
func (crdStrategy) ValidateStatusUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	in, errs := internalCRD(withoutSpec(obj))
	if len(errs) > 0 {
		return errs
	}
	oldIn, errs := internalCRD(withoutSpec(old))
	if len(errs) > 0 {
		return errs
	}
	return crdvalidation.ValidateUpdateCustomResourceDefinitionStatus(context.Background(), in, oldIn)
}
