package rest

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

const (
	jsonPatchType      = "application/json-patch+json"
	mergePatchType     = "application/merge-patch+json"
	strategicPatchType = "application/strategic-merge-patch+json"
	applyPatchType     = "application/apply-patch+yaml"
)

func (c *call) patch() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	o, err := c.parseWriteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	ct := c.r.Header.Get("Content-Type")
	// The patch types this kind takes, in upstream's order: strategic merge patch only for
	// built-in kinds (it needs their Go types).
	accepted := []string{jsonPatchType, mergePatchType, strategicPatchType, applyPatchType}
	if c.kind.NewTyped == nil {
		accepted = []string{jsonPatchType, mergePatchType, applyPatchType}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(accepted, mt) {
		c.fail(unsupportedPatchType(accepted))
		return
	}
	body, err := readBody(c.r)
	if err != nil {
		c.fail(err)
		return
	}
	patch, err := bodyJSON(mt, body, false)
	if err != nil {
		c.fail(err)
		return
	}
	if c.info.Subresource == "scale" {
		switch mt {
		case strategicPatchType:
			c.fail(unsupportedPatchType([]string{jsonPatchType, mergePatchType, applyPatchType}))
		case applyPatchType:
			c.scaleApply(o, patch)
		default:
			c.scalePatch(o, mt, patch)
		}
		return
	}
	if mt == applyPatchType {
		c.apply(patch, o, out)
		return
	}
	var ops jsonpatch.Patch
	if mt == jsonPatchType {
		if ops, err = jsonpatch.DecodePatch(patch); err != nil {
			c.fail(apierrors.NewBadRequest("the JSON patch is malformed: " + err.Error()))
			return
		}
	} else if _, err := decodeObject(patch); err != nil {
		c.fail(err)
		return
	}
	checkedFields, unknown := false, false
	updated, err := c.updateObject(nil, o, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		orig, err := toJSON(cur)
		if err != nil {
			return nil, err
		}
		var patched []byte
		switch mt {
		case jsonPatchType:
			patched, err = ops.Apply(orig)
		case mergePatchType:
			patched, err = jsonpatch.MergePatch(orig, patch)
		case strategicPatchType:
			patched, err = strategicpatch.StrategicMergePatch(orig, patch, c.kind.NewTyped())
		}
		if err != nil {
			return nil, patchError(err)
		}
		if !checkedFields {
			if unknown, err = c.checkPatchedFields(o, patch, patched); err != nil {
				return nil, err
			}
			checkedFields = true
		}
		var obj *unstructured.Unstructured
		if unknown && c.kind.NewTyped != nil {
			obj, err = c.withoutUnknownFields(patched, nil)
		} else {
			obj, err = decodeObject(patched)
		}
		if err != nil {
			return nil, patchError(err)
		}
		if obj.GetAPIVersion() != cur.GetAPIVersion() || obj.GetKind() != cur.GetKind() {
			return nil, apierrors.NewBadRequest("a patch may not change apiVersion or kind")
		}
		if obj.GetName() != cur.GetName() {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), cur.GetName()))
		}
		if obj.GetNamespace() != cur.GetNamespace() {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if rv := obj.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
			// A resourceVersion in the patch is a precondition, as upstream.
			return nil, &storage.Error{Kind: storage.ErrConflict, Key: c.key()}
		}
		return obj, nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.writeObject(http.StatusOK, updated, out)
}

// checkPatchedFields is checkFields for the result of a JSON, merge or strategic merge
// patch. As kube-apiserver, it blames the patch: a result the kind's Go type cannot hold, or
// unknown fields under Strict, fail with 422 Invalid on the field "patch".
// It reports whether the result had unknown or duplicate fields, as checkFields does.
func (c *call) checkPatchedFields(o writeOptions, patch, patched []byte) (bool, error) {
	errs, decodeErr := c.fieldErrors(patched)
	msg := ""
	switch {
	case decodeErr != nil:
		msg = decodeErr.Error()
	case len(errs) == 0 || o.fieldValidation == "Ignore":
		return len(errs) > 0, nil
	case o.fieldValidation == "Strict":
		msg = strictMessage(errs)
	default:
		for _, e := range errs {
			addWarning(c.w, e.Error())
		}
		return true, nil
	}
	return false, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patch), msg)})
}

func patchError(err error) error {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "the patch could not be applied: "+err.Error(), 0, false)
}

// apply serves server-side apply (application/apply-patch+yaml): the applied configuration
// is merged into the live object by the field manager, which removes the fields this
// manager applied before and no longer does, and refuses (409) to change fields other
// managers own unless force is set; a missing object is created.
func (c *call) apply(patch []byte, o writeOptions, out output) {
	applied, ok := c.decodeApplied(patch)
	if !ok {
		return
	}
	if err := c.checkTypeMeta(applied); err != nil {
		c.fail(err)
		return
	}
	if applied.GetName() != "" && applied.GetName() != c.info.Name {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", applied.GetName(), c.info.Name)))
		return
	}
	applied.SetName(c.info.Name)
	unknown, err := c.checkAppliedFields(o, patch, applied)
	if err != nil {
		c.fail(err)
		return
	}
	if unknown && c.kind.NewTyped != nil {
		if applied, err = c.withoutUnknownFields(patch, applied); err != nil {
			c.fail(err)
			return
		}
		applied.SetName(c.info.Name)
	}
	if p, ok := c.kind.StrategyOrDefault().(registry.UnknownFieldPruner); ok {
		// Custom resources: fields the schema prunes are dropped (and were reported above)
		// rather than failing the field manager, as for any other write.
		p.PruneUnknownFields(applied.Object)
	}
	fm := c.fieldManager()
	if fm == nil {
		c.fail(unsupportedPatchType([]string{jsonPatchType, mergePatchType}))
		return
	}
	o.applied = true
	if _, err := c.h.store.Get(c.ctx, c.key()); errors.Is(err, storage.ErrNotFound) && c.info.Subresource == "" {
		live, _ := (&kindConvertor{}).New(c.kind.GVK())
		obj, err := fm.Apply(live, applied.DeepCopy(), o.manager, o.force)
		if err != nil {
			c.fail(applyError(err))
			return
		}
		created, code, err := c.createObject(obj.(*unstructured.Unstructured), o)
		if err == nil || !apierrors.IsAlreadyExists(err) {
			if err != nil {
				c.fail(err)
				return
			}
			c.writeObject(code, created, out)
			return
		}
		// Created by someone else meanwhile: apply to theirs.
	}
	updated, err := c.updateObject(nil, o, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		obj, err := fm.Apply(cur.DeepCopy(), applied.DeepCopy(), o.manager, o.force)
		if err != nil {
			return nil, applyError(err)
		}
		return obj.(*unstructured.Unstructured), nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.writeObject(http.StatusOK, updated, out)
}

// checkAppliedFields is checkFields for an apply body. Under Strict, unknown fields are
// refused as kube-apiserver's field manager refuses them (its typed conversion of the
// applied configuration: ".spec.foo: field not declared in schema"), duplicates as its YAML
// check does ("error strict decoding YAML: ...").
func (c *call) checkAppliedFields(o writeOptions, patch []byte, applied *unstructured.Unstructured) (bool, error) {
	errs, decodeErr := c.fieldErrors(patch)
	if decodeErr != nil {
		return false, apierrors.NewBadRequest(decodeErr.Error())
	}
	if o.fieldValidation != "Strict" || len(errs) == 0 {
		return len(errs) > 0, c.applyFieldValidation(o, errs, "")
	}
	var undeclared, other []string
	for _, e := range errs {
		msg := e.Error()
		if path, ok := strings.CutPrefix(msg, `unknown field "`); ok {
			undeclared = append(undeclared, "."+strings.TrimSuffix(path, `"`)+": field not declared in schema")
		} else {
			other = append(other, msg)
		}
	}
	if len(undeclared) > 0 {
		detail := undeclared[0]
		if len(undeclared) > 1 {
			detail = "errors:\n  " + strings.Join(undeclared, "\n  ")
		}
		gvk := c.kind.GVK()
		return false, apierrors.NewBadRequest(fmt.Sprintf("failed to create typed patch object (%s/%s; %s, Kind=%s): %s",
			c.info.Namespace, applied.GetName(), gvk.GroupVersion(), gvk.Kind, detail))
	}
	return false, apierrors.NewBadRequest("error strict decoding YAML: " + strings.Join(other, ", "))
}

// applyError is the answer to a failed apply: the field manager's own answers (conflicts,
// managedFields in the body) as they are, anything else a 400 — what remains is an applied
// configuration that does not fit the kind's schema (a string where a number belongs).
func applyError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewBadRequest("the applied configuration does not fit the schema: " + err.Error())
}

// decodeApplied decodes the body of a server-side apply (which must name its field
// manager) and records it as the audit event's request object: the audit filter keeps only
// JSON bodies, and an apply body is YAML (kube-apiserver logs the patch transcoded to JSON).
// On failure it answers the request and returns false.
func (c *call) decodeApplied(patch []byte) (*unstructured.Unstructured, bool) {
	if c.r.URL.Query().Get("fieldManager") == "" {
		c.fail(apierrors.NewBadRequest("PATCH requests with the apply content type (application/apply-patch+yaml) require a fieldManager"))
		return nil, false
	}
	applied, err := decodeObject(patch)
	if err != nil {
		c.fail(err)
		return nil, false
	}
	if a := request.AuditFrom(c.ctx); a != nil && a.WantRequest {
		a.SetRequestObject(applied.DeepCopy().Object)
	}
	return applied, true
}
