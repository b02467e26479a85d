package rest

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/registry"
)

// attributes describes the call to admission.
func (c *call) attributes(op admission.Operation, obj, old *unstructured.Unstructured, dryRun bool) *admission.Attributes {
	u, _ := request.UserFrom(c.ctx)
	name := c.info.Name
	if obj != nil && obj.GetName() != "" {
		name = obj.GetName()
	}
	ns := c.objNamespace()
	if obj != nil && c.kind.Namespaced && obj.GetNamespace() != "" {
		ns = obj.GetNamespace()
	}
	audit := request.AuditFrom(c.ctx)
	for _, o := range []*unstructured.Unstructured{obj, old} {
		if o != nil {
			audit.SetObject(o.GetName(), o.GetNamespace(), string(o.GetUID()), "")
		}
	}
	return &admission.Attributes{
		Operation: op, Kind: c.kind.GVK(), Resource: c.kind.GVR(), Subresource: c.info.Subresource,
		Namespace: ns, Name: name, Object: obj, OldObject: old, User: u, DryRun: dryRun,
		Namespaced: c.kind.Namespaced, TypeConverter: c.typeConverter,
	}
}

// typeConverter is the kind's structured-merge-diff type converter, built once per Kind.
func (c *call) typeConverter() managedfields.TypeConverter {
	return c.kind.Derived(typeConverterKey{}, func() any { return typeConverterFor(c.h.reg, c.kind) }).(managedfields.TypeConverter)
}

type typeConverterKey struct{}

// admit runs mutating admission on obj (which it may change).
func (c *call) admit(op admission.Operation, obj, old *unstructured.Unstructured, dryRun bool) error {
	if c.h.admission == nil {
		return nil
	}
	a := c.attributes(op, obj, old, dryRun)
	if obj != nil && c.prepared.For(obj.Object) {
		a.Versioned = c.prepared.Versioned
	}
	c.admitted, c.prepared = nil, nil
	if err := admissionError(c.h.admission.Admit(c.admissionContext(), a), c); err != nil {
		return err
	}
	if a.Admitted != nil && obj != nil && a.Object == obj && registry.SameMap(a.AdmittedContent, obj.Object) {
		c.admitted = &registry.Validated{Content: obj.Object, Object: a.Admitted}
		if a.OldObject == old {
			c.admitted.Old = a.AdmittedOld
		}
	}
	return nil
}

// validateAdmission runs validating admission.
func (c *call) validateAdmission(op admission.Operation, obj, old *unstructured.Unstructured, dryRun bool) error {
	if c.h.admission == nil {
		return nil
	}
	a := c.attributes(op, obj, old, dryRun)
	if v := c.validated; obj != nil && v.For(obj.Object) && v.Object != nil &&
		(c.info.Subresource == "" || c.info.Subresource == "status") {
		// Validation converted these objects a moment ago; nothing changed them since.
		a.Internal, a.OldInternal = v.Object, v.Old
	}
	return admissionError(c.h.admission.Validate(c.admissionContext(), a), c)
}

// admissionContext lets admission add Warning headers to the response.
func (c *call) admissionContext() context.Context {
	return request.WithWarner(c.ctx, func(text string) { addWarning(c.w, text) })
}

// admissionError: admission refusals that are not API errors already are 403 Forbidden.
func admissionError(err error, c *call) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return apierrors.NewForbidden(c.gr, c.info.Name, err)
}

// toStorage turns a validated object of the request's version into the storage version.
func (c *call) toStorage(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.kind.ToStorage == nil {
		return obj, nil
	}
	out, err := c.kind.ToStorage(c.ctx, obj)
	if err != nil {
		return nil, conversionError(err, c)
	}
	return out, nil
}

// fromStorage1 turns one stored object into the request's version.
func (c *call) fromStorage1(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.kind.FromStorage == nil || obj == nil {
		return obj, nil
	}
	out, err := c.fromStorage([]*unstructured.Unstructured{obj})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// fromStorage turns stored objects (possibly shared, never changed) into the request's
// version.
func (c *call) fromStorage(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if c.kind.FromStorage == nil || len(objs) == 0 {
		return objs, nil
	}
	out, err := c.kind.FromStorage(c.ctx, objs)
	if err != nil {
		return nil, conversionError(err, c)
	}
	return out, nil
}

// fromStorageDetached converts outside of a request (watch event encodings are shared by
// every watcher and must not depend on one request's lifetime).
func (c *call) fromStorageDetached(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.kind.FromStorage == nil || obj == nil {
		return obj, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.kind.FromStorage(ctx, []*unstructured.Unstructured{obj})
	if err != nil {
		return nil, conversionError(err, c)
	}
	return out[0], nil
}

// conversionError: a conversion that fails (a webhook down, answering garbage) fails the
// request with a clear Status, never the server.
func conversionError(err error, c *call) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	se := apierrors.NewInternalError(err)
	se.ErrStatus.Message = "conversion of " + c.gr.String() + " failed: " + err.Error()
	return se
}
