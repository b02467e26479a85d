package builtin

import (
	"context"
	"fmt"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	upstream "k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
)

// scheme holds upstream's built-in types, their conversions and defaults (pkg/apis/*/install,
// imported in install.go).
var scheme = legacyscheme.Scheme

// objectInterfaces is what upstream's plugins get as admission.ObjectInterfaces.
var objectInterfaces = upstream.NewObjectInterfacesFromScheme(scheme)

// toInternal turns a served object into the object upstream's plugins expect: the internal
// type of a built-in kind (through its v1 type, with v1 defaults applied when defaults is
// set, as kube-apiserver's decoder leaves a request's object), or the unstructured object
// itself for kinds upstream does not know (custom resources, Kube's own kinds), which the
// plugins read through meta accessors.
func toInternal(u *unstructured.Unstructured, gvk schema.GroupVersionKind, defaults bool) (runtime.Object, error) {
	if u == nil {
		return nil, nil
	}
	internalGVK := gvk.GroupKind().WithVersion(runtime.APIVersionInternal)
	if !scheme.Recognizes(gvk) || !scheme.Recognizes(internalGVK) {
		return u, nil
	}
	ext, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ext); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding %s for admission: %v", gvk.Kind, err))
	}
	if defaults {
		scheme.Default(ext)
	}
	return versionedToInternal(ext, gvk)
}

// versionedToInternal converts ext, a typed object of version gvk with its defaults, to its
// internal type; nil when the scheme does not know its internal type (convert the content).
func versionedToInternal(ext runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	internalGVK := gvk.GroupKind().WithVersion(runtime.APIVersionInternal)
	if !scheme.Recognizes(gvk) || !scheme.Recognizes(internalGVK) {
		return nil, nil
	}
	in, err := scheme.New(internalGVK)
	if err != nil {
		return nil, err
	}
	if err := scheme.Convert(ext, in, nil); err != nil {
		return nil, fmt.Errorf("converting %s to its internal type: %w", gvk.Kind, err)
	}
	return in, nil
}

// fromInternal turns an internal object back into the served version gvk as unstructured
// content (the inverse of toInternal).
func fromInternal(in runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	ext, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := scheme.Convert(in, ext, nil); err != nil {
		return nil, fmt.Errorf("converting %s from its internal type: %w", gvk.Kind, err)
	}
	ext.GetObjectKind().SetGroupVersionKind(gvk)
	return runtime.DefaultUnstructuredConverter.ToUnstructured(ext)
}

// objectKind is the kind of the object a request carries: its own apiVersion and kind when
// set (a Binding or an Eviction posted to a pod's subresource), the request's kind otherwise.
func objectKind(u *unstructured.Unstructured, fallback schema.GroupVersionKind) schema.GroupVersionKind {
	if u != nil {
		if gvk := u.GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
			return gvk
		}
	}
	return fallback
}

// converted is one request as upstream's plugins see it. Objects are converted lazily, on
// a plugin's first GetObject or GetOldObject: most plugins look only at the resource, and
// most requests concern resources no plugin reads.
type converted struct {
	upstream.Attributes
	audit *request.Audit

	obj, old       *unstructured.Unstructured
	objGVK, oldGVK schema.GroupVersionKind
	copyObj        bool

	objOnce, oldOnce sync.Once
	objIn, oldIn     runtime.Object
	// versioned is obj's content as a typed object of its version, defaulted (mutating only;
	// admission.Attributes.Versioned).
	versioned runtime.Object
	// given and oldGiven are the caller's internal forms of obj and old (validating only).
	given, oldGiven runtime.Object
	// before is a copy of the internal object as converted, to tell whether a mutating
	// plugin changed it (nil when not converted or unstructured).
	before runtime.Object
	err    error
	errMu  sync.Mutex
}

// convert builds upstream's admission attributes from ours: objects converted to their
// internal types (lazily), the request's options typed, the user as a user.Info.
func convert(ctx context.Context, a *admission.Attributes, mutating bool) (*converted, error) {
	opts, err := operationOptions(a.Operation, a.Options)
	if err != nil {
		return nil, err
	}
	c := &converted{audit: request.AuditFrom(ctx), obj: a.Object, old: a.OldObject, copyObj: mutating,
		objGVK: objectKind(a.Object, a.Kind), oldGVK: objectKind(a.OldObject, a.Kind)}
	if mutating && a.Subresource == "" && c.objGVK == a.Kind {
		c.versioned = a.Versioned
	}
	if !mutating {
		c.given, c.oldGiven = a.Internal, a.OldInternal
	}
	kind := a.Kind
	if a.Subresource != "" {
		// A subresource's own kind (Binding, Eviction, Scale), as upstream's handlers pass it.
		kind = c.objGVK
	}
	c.Attributes = upstream.NewAttributesRecord(nil, nil, kind, a.Namespace, a.Name, a.Resource, a.Subresource,
		upstream.Operation(a.Operation), opts, a.DryRun, userInfo(a.User))
	return c, nil
}

func (c *converted) fail(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// conversionErr is the first error converting an object (the plugins saw nil for it).
func (c *converted) conversionErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// GetObject is the proposed object as its internal type.
func (c *converted) GetObject() runtime.Object {
	c.objOnce.Do(func() {
		if c.given != nil {
			c.objIn = c.given
			return
		}
		// Defaults once, for the mutating plugins; by validating admission the object has
		// been through them and the kind's strategy, and a stored object has its defaults.
		var in runtime.Object
		var err error
		if c.versioned != nil {
			in, err = versionedToInternal(c.versioned, c.objGVK)
		}
		if in == nil && err == nil {
			in, err = toInternal(c.obj, c.objGVK, c.copyObj)
		}
		if err != nil {
			c.fail(err)
			return
		}
		if c.copyObj && in != nil {
			if _, ok := in.(*unstructured.Unstructured); !ok {
				c.before = in.DeepCopyObject()
			}
		}
		c.objIn = in
	})
	if c.objIn == nil {
		return nil // a typed nil would not compare equal to nil
	}
	return c.objIn
}

// GetOldObject is the stored object as its internal type.
func (c *converted) GetOldObject() runtime.Object {
	c.oldOnce.Do(func() {
		if c.oldGiven != nil {
			c.oldIn = c.oldGiven
			return
		}
		in, err := toInternal(c.old, c.oldGVK, false)
		if err != nil {
			c.fail(err)
			return
		}
		c.oldIn = in
	})
	if c.oldIn == nil {
		return nil
	}
	return c.oldIn
}

// writeBack replaces a.Object's content with the internal object a mutating plugin changed.
// An object no plugin converted or changed is left as it was, so that a request no plugin
// touched is stored exactly as the handler prepared it.
func (c *converted) writeBack(a *admission.Attributes) error {
	if c.objIn == nil || a.Object == nil {
		return nil
	}
	if _, ok := c.objIn.(*unstructured.Unstructured); ok {
		return nil // changed in place
	}
	if c.before == nil || !apiequality.Semantic.DeepEqual(c.before, c.objIn) {
		content, err := fromInternal(c.objIn, c.objGVK)
		if err != nil {
			return err
		}
		a.Object.Object = content
	}
	if a.Subresource == "" && c.objGVK == a.Kind {
		// The internal form now stands for the content: validation may take it.
		a.Admitted, a.AdmittedContent = c.objIn, a.Object.Object
		if _, ok := c.oldIn.(*unstructured.Unstructured); !ok && c.oldIn != nil {
			a.AdmittedOld = c.oldIn
		}
	}
	return nil
}

// AddAnnotation passes the plugins' audit annotations (PodSecurity's audit mode, for one)
// on to the request's audit event.
func (c *converted) AddAnnotation(key, value string) error {
	return c.AddAnnotationWithLevel(key, value, auditinternal.LevelMetadata)
}

// AddAnnotationWithLevel: see AddAnnotation.
func (c *converted) AddAnnotationWithLevel(key, value string, level auditinternal.Level) error {
	if err := c.Attributes.AddAnnotationWithLevel(key, value, level); err != nil {
		return err
	}
	if c.audit != nil {
		c.audit.AddAnnotation(key, value)
	}
	return nil
}

// operationOptions types the request's options as upstream's handlers pass them.
func operationOptions(op admission.Operation, raw map[string]any) (runtime.Object, error) {
	var out runtime.Object
	var kind string
	switch op {
	case admission.Create:
		out, kind = &metav1.CreateOptions{}, "CreateOptions"
	case admission.Update:
		out, kind = &metav1.UpdateOptions{}, "UpdateOptions"
	case admission.Delete:
		out, kind = &metav1.DeleteOptions{}, "DeleteOptions"
	default:
		return nil, nil
	}
	if raw != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, out); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding %s options for admission: %v", op, err))
		}
	}
	out.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind(kind))
	return out, nil
}

// userInfo is the request's user as upstream's authentication describes it.
func userInfo(u *request.User) user.Info {
	if u == nil {
		return &user.DefaultInfo{}
	}
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// warner passes the plugins' warnings (warning.AddWarning) on to the response's Warning
// headers.
type warner struct{ ctx context.Context }

func (w warner) AddWarning(_, text string) { request.AddWarning(w.ctx, text) }

func withWarnings(ctx context.Context) context.Context {
	return warning.WithWarningRecorder(ctx, warner{ctx})
}
