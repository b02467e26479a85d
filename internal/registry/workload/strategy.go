package workload

import (
	"context"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/apis/batch"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/registry"
)

// strategy adapts upstream's REST strategies of one kind (internal Go types) to the
// registry's unstructured objects. Defaults apply when the request is read (PrepareFor*),
// as kube-apiserver's decoder applies them; upstream's PrepareForCreate/Update, validation,
// warnings and canonicalisation run together after mutating admission (ValidateCreateContext,
// ValidateUpdateContext), through the same rest.BeforeCreate/BeforeUpdate that
// kube-apiserver's generic store calls.
type strategy struct {
	gvk    schema.GroupVersionKind
	gvr    schema.GroupVersionResource
	goType reflect.Type
	create rest.RESTCreateStrategy
	update rest.RESTUpdateStrategy
	// subresources are the update strategies of status and of the field subresources.
	subresources map[string]rest.RESTUpdateStrategy
	graceful     rest.RESTGracefulDeleteStrategy
}

var (
	_ registry.ContextStrategy = (*strategy)(nil)
	_ registry.TypedPreparer   = (*strategy)(nil)
	_ registry.GracefulDeleter = (*strategy)(nil)
)

func (s *strategy) PrepareForCreate(obj *unstructured.Unstructured) { s.PrepareForCreateTyped(obj) }

// PrepareForCreateTyped implements registry.TypedPreparer.
func (s *strategy) PrepareForCreateTyped(obj *unstructured.Unstructured) runtime.Object {
	jobWithoutLabels := s.gvk.Group == "batch" && s.gvk.Kind == "Job" && len(obj.GetLabels()) == 0
	ext := defaulted(obj, s.gvk)
	if jobWithoutLabels {
		s.aliasJobLabels(obj)
		return nil // its labels changed in place
	}
	return ext
}

// aliasJobLabels gives a Job created without labels the labels its template ends up with.
// Upstream's defaulting makes such a Job's labels the template's labels map itself
// (SetDefaults_Job), so the selector labels its strategy then generates into the template
// (controller-uid, job-name) land in the Job's labels too; here the two are separate maps,
// so the template's final labels are computed by upstream's PrepareForCreate on a copy and
// set on the Job. The handler set the name and uid they derive from already.
func (s *strategy) aliasJobLabels(obj *unstructured.Unstructured) {
	in, err := toInternal(obj.Object, s.gvk)
	if err != nil {
		return
	}
	s.create.PrepareForCreate(context.Background(), in)
	if j, ok := in.(*batch.Job); ok && len(j.Spec.Template.Labels) > 0 {
		obj.SetLabels(j.Spec.Template.Labels)
	}
}
func (s *strategy) PrepareForUpdate(obj, _ *unstructured.Unstructured) { defaulted(obj, s.gvk) }

// PrepareForUpdateTyped implements registry.TypedPreparer.
func (s *strategy) PrepareForUpdateTyped(obj, _ *unstructured.Unstructured) runtime.Object {
	return defaulted(obj, s.gvk)
}

// Validate and ValidateUpdate serve callers without a request; the handler calls the
// Context variants.
func (s *strategy) Validate(obj *unstructured.Unstructured) field.ErrorList {
	return causes(s.ValidateCreateContext(context.Background(), obj))
}

func (s *strategy) ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	return causes(s.ValidateUpdateContext(context.Background(), obj, old, ""))
}

// ValidateCreateContext implements registry.ContextStrategy.
func (s *strategy) ValidateCreateContext(ctx context.Context, obj *unstructured.Unstructured) error {
	in, err := s.decodeContext(ctx, obj)
	if err != nil {
		return err
	}
	if err := rest.BeforeCreate(s.create, upstreamContext(ctx, obj.GetNamespace(), s.gvr, "create", ""), in); err != nil {
		return err
	}
	return s.encodeInto(ctx, obj, in, nil)
}

// ValidateUpdateContext implements registry.ContextStrategy.
func (s *strategy) ValidateUpdateContext(ctx context.Context, obj, old *unstructured.Unstructured, subresource string) error {
	st := s.update
	// A write through scale is an update of the object, as upstream's scale REST stores it.
	if subresource != "" && subresource != "scale" {
		var ok bool
		if st, ok = s.subresources[subresource]; !ok {
			return apierrors.NewNotFound(schema.GroupResource{Group: s.gvk.Group, Resource: subresource}, obj.GetName())
		}
	}
	var in runtime.Object
	if subresource != "" {
		// A subresource's body is defaulted as any request body (the handler calls
		// PrepareForUpdate for writes of the object itself only); the typed object that
		// made is converted, not the content made from it decoded again, and not written
		// back: encodeInto replaces obj's content with what was validated. (A body that
		// does not decode is left as it was, and decoded below for the errors it gets.)
		if ext := defaultedTyped(obj, s.gvk); ext != nil {
			in = versionedToInternal(ext, s.gvk)
		}
	}
	if in == nil {
		var err error
		if in, err = s.decodeContext(ctx, obj); err != nil {
			return err
		}
	}
	oldIn, err := s.decodeOld(ctx, old)
	if err != nil {
		// The stored object is beyond repair: let a valid new one replace it.
		return s.ValidateCreateContext(ctx, obj)
	}
	if err := rest.BeforeUpdate(st, upstreamContext(ctx, obj.GetNamespace(), s.gvr, "update", subresource), in, oldIn); err != nil {
		return err
	}
	return s.encodeInto(ctx, obj, in, oldIn)
}

// GracePeriod implements registry.GracefulDeleter with the kind's CheckGracefulDelete.
func (s *strategy) GracePeriod(obj *unstructured.Unstructured, requested *int64) int64 {
	if s.graceful == nil {
		return 0
	}
	in, err := toInternal(obj.Object, s.gvk)
	if err != nil {
		return 0
	}
	opts := &metav1.DeleteOptions{GracePeriodSeconds: requested}
	if !s.graceful.CheckGracefulDelete(context.Background(), in, opts) || opts.GracePeriodSeconds == nil {
		return 0
	}
	return *opts.GracePeriodSeconds
}

// decodeContext is decode, or the internal form mutating admission left for obj (see
// registry.Validated): the built-in plugins converted the content (with its defaults) and
// changed that form, and their changes were written back into obj.Object, so decoding it
// again would give the same object. Upstream does not default what built-in plugins add
// either; what a webhook or policy changed is new content, decoded (and defaulted) below.
func (s *strategy) decodeContext(ctx context.Context, obj *unstructured.Unstructured) (runtime.Object, error) {
	if v := registry.ValidatedFrom(ctx); v.For(obj.Object) && v.Object != nil && s.isInternal(v.Object) {
		in := v.Object
		v.Object = nil // handed over: validation changes it
		return in, nil
	}
	return s.decode(obj)
}

// decodeOld is the stored object's internal form: the one admission read, when it did.
func (s *strategy) decodeOld(ctx context.Context, old *unstructured.Unstructured) (runtime.Object, error) {
	if v := registry.ValidatedFrom(ctx); v != nil && v.Old != nil && s.isInternal(v.Old) {
		return v.Old, nil
	}
	return toInternal(old.Object, s.gvk)
}

// isInternal says whether o is this kind's internal type.
func (s *strategy) isInternal(o runtime.Object) bool {
	gvks, _, err := scheme.ObjectKinds(o)
	return err == nil && len(gvks) > 0 && gvks[0].GroupKind() == s.gvk.GroupKind() && gvks[0].Version == runtime.APIVersionInternal
}

// decode turns a request object into the internal type; values of the wrong type are a 422
// with a cause each, as kube-apiserver's decoder refuses them (with 400 there; the fields
// are named here).
func (s *strategy) decode(obj *unstructured.Unstructured) (runtime.Object, error) {
	if errs := registry.CheckTypes(obj.Object, s.goType, nil); len(errs) > 0 {
		return nil, apierrors.NewInvalid(s.gvk.GroupKind(), obj.GetName(), errs)
	}
	// Defaulted again: mutating admission ran after PrepareFor* defaulted the request, and
	// what a webhook or policy added (an init container) gets its defaults, as upstream
	// defaults the object after each webhook's patch.
	in, err := toInternalDefaulted(obj.Object, s.gvk)
	if err != nil {
		return nil, apierrors.NewBadRequest(s.gvk.Kind + " in version \"" + s.gvk.Version + "\" cannot be handled as a " + s.gvk.Kind + ": " + err.Error())
	}
	return in, nil
}

// encodeInto replaces obj's content with in, converted to obj's version with its defaults.
// When ctx carries a registry.Validated, it is filled with obj's internal form for
// validating admission: converted back from the versioned object obj's content was made from
// (generated conversions, not a decode of the content), so that it carries the defaults a
// decode would. old is the stored object's internal form, or nil.
func (s *strategy) encodeInto(ctx context.Context, obj *unstructured.Unstructured, in, old runtime.Object) error {
	ext, err := defaultedExternal(in, s.gvk)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	m, err := toUnstructured(ext, s.gvk)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	obj.Object = m
	v := registry.ValidatedFrom(ctx)
	if v == nil {
		return nil
	}
	*v = registry.Validated{}
	back, err := scheme.New(s.gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil || scheme.Convert(ext, back, nil) != nil {
		return nil // validating admission converts obj itself
	}
	*v = registry.Validated{Content: obj.Object, Object: back, Old: old, Versioned: ext}
	return nil
}

// causes turns a validation error back into field errors.
func causes(err error) field.ErrorList {
	if err == nil {
		return nil
	}
	var errs field.ErrorList
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Details != nil {
		for _, c := range se.Status().Details.Causes {
			errs = append(errs, &field.Error{Type: field.ErrorType(c.Type), Field: c.Field, Detail: c.Message})
		}
	}
	if len(errs) == 0 {
		errs = append(errs, field.InternalError(nil, err))
	}
	return errs
}

// upstreamContext is the request context as upstream's strategies read it: the user, the
// request info, the namespace and a sink for warnings (Warning headers).
// Without a request (a write from inside the server), the request info is made up from
// the kind, the verb and the subresource.
func upstreamContext(ctx context.Context, namespace string, gvr schema.GroupVersionResource, verb, subresource string) context.Context {
	uctx := genericapirequest.WithNamespace(ctx, namespace)
	if u, ok := request.UserFrom(ctx); ok && u != nil {
		uctx = genericapirequest.WithUser(uctx, &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra})
	}
	ri := &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: verb, APIGroup: gvr.Group, APIVersion: gvr.Version,
		Namespace: namespace, Resource: gvr.Resource, Subresource: subresource}
	if info, ok := request.InfoFrom(ctx); ok && info != nil && info.IsResourceRequest {
		ri = &genericapirequest.RequestInfo{
			IsResourceRequest: info.IsResourceRequest, Path: info.Path, Verb: info.Verb,
			APIPrefix: info.APIPrefix, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
			Namespace: info.Namespace, Resource: info.Resource, Subresource: info.Subresource,
			Name: info.Name, Parts: info.Parts,
		}
	}
	// Declarative validation names its checks after the request.
	uctx = genericapirequest.WithRequestInfo(uctx, ri)
	return warning.WithWarningRecorder(uctx, warner{ctx})
}

// warner passes upstream's warnings on to the response.
type warner struct{ ctx context.Context }

func (w warner) AddWarning(_, text string) { request.AddWarning(w.ctx, text) }
