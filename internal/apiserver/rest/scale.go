package rest

import (
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"kubeos.dev/kube/internal/storage"
)

// The scale subresource reads and writes the replica count of any kind whose Kind.Scale
// names where it lives (CRDs' specReplicasPath, statusReplicasPath, labelSelectorPath), as
// an autoscaling/v1 Scale.

func pathFields(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// pathElements is pathFields as fieldpath.MakePath takes them.
func pathElements(p string) []any {
	var out []any
	for _, f := range pathFields(p) {
		out = append(out, f)
	}
	return out
}

// scaleOf renders obj's Scale.
func (c *call) scaleOf(obj *unstructured.Unstructured) map[string]any {
	s := c.kind.Scale
	spec, _, _ := unstructured.NestedFieldNoCopy(obj.Object, pathFields(s.SpecReplicasPath)...)
	status := map[string]any{"replicas": int64(0)}
	if s.StatusReplicasPath != "" {
		if v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, pathFields(s.StatusReplicasPath)...); ok {
			status["replicas"] = v
		}
	}
	if s.Selector != nil {
		status["selector"] = s.Selector(obj)
	} else if s.LabelSelectorPath != "" {
		if v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, pathFields(s.LabelSelectorPath)...); ok {
			if sel, ok := v.(string); ok {
				status["selector"] = sel
			}
		}
	}
	if spec == nil {
		spec = int64(0)
	}
	md := map[string]any{"name": obj.GetName(), "uid": string(obj.GetUID()), "resourceVersion": obj.GetResourceVersion(),
		"creationTimestamp": obj.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")}
	if obj.GetNamespace() != "" {
		md["namespace"] = obj.GetNamespace()
	}
	return map[string]any{"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": md,
		"spec": map[string]any{"replicas": spec}, "status": status}
}

func (c *call) writeScale(code int, obj *unstructured.Unstructured) {
	writeJSON(c.w, code, c.scaleOf(obj))
}

// updateScale changes the replica count to what next computes from the current Scale.
// Ownership of the replicas moves as upstream's scale handler moves it: the parent's
// managedFields are shown to the Scale's field manager as Scale fields, and its result is
// mapped back (apply: next ran the field manager's Apply itself).
func (c *call) updateScale(o writeOptions, next func(scale map[string]any) (map[string]any, error)) {
	var pre *storage.Preconditions
	updated, err := c.updateObject(pre, o, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		handler := managedfields.NewScaleHandler(cur.GetManagedFields(), c.kind.GroupVersion(), managedfields.ResourcePathMappings{
			c.kind.APIVersion(): fieldpath.MakePathOrDie(pathElements(c.kind.Scale.SpecReplicasPath)...)})
		old := &unstructured.Unstructured{Object: c.scaleOf(cur)}
		if entries, err := handler.ToSubresource(); err == nil {
			old.SetManagedFields(entries)
		}
		scale, err := next(old.DeepCopy().Object)
		if err != nil {
			return nil, err
		}
		fm := c.scaleFieldManager()
		if fm != nil && !o.applied {
			scale = fm.UpdateNoErrors(old, &unstructured.Unstructured{Object: scale}, o.manager).(*unstructured.Unstructured).Object
		}
		if rv, _, _ := unstructured.NestedString(scale, "metadata", "resourceVersion"); rv != "" && rv != cur.GetResourceVersion() {
			return nil, &storage.Error{Kind: storage.ErrConflict, Key: c.key()}
		}
		replicas, ok, _ := unstructured.NestedFieldNoCopy(scale, "spec", "replicas")
		n, isInt := replicas.(int64)
		if !ok || !isInt || n < 0 {
			return nil, apierrors.NewInvalid(schemaGK("autoscaling", "Scale"), c.info.Name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), replicas, "must be a non-negative integer")})
		}
		obj := cur.DeepCopy()
		if err := unstructured.SetNestedField(obj.Object, n, pathFields(c.kind.Scale.SpecReplicasPath)...); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot set %s: %v", c.kind.Scale.SpecReplicasPath, err))
		}
		if fm != nil {
			if entries, err := handler.ToParent((&unstructured.Unstructured{Object: scale}).GetManagedFields()); err == nil {
				obj.SetManagedFields(entries)
			}
		}
		return obj, nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.writeScale(http.StatusOK, updated)
}

// scaleUpdate serves PUT on /scale.
func (c *call) scaleUpdate(o writeOptions) {
	body, err := readBody(c.r)
	if err != nil {
		c.fail(err)
		return
	}
	data, err := bodyJSON(c.r.Header.Get("Content-Type"), body, true)
	if err != nil {
		c.fail(err)
		return
	}
	in, err := decodeObject(data)
	if err != nil {
		c.fail(err)
		return
	}
	if k := in.GetKind(); k != "" && k != "Scale" {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (Scale)", k)))
		return
	}
	if n := in.GetName(); n != "" && n != c.info.Name {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, c.info.Name)))
		return
	}
	if ns := in.GetNamespace(); ns != "" && ns != c.info.Namespace {
		c.fail(apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
		return
	}
	c.updateScale(o, func(map[string]any) (map[string]any, error) { return in.Object, nil })
}

// scaleApply serves a server-side apply to /scale: the applied Scale is merged into the
// current one by the Scale's field manager.
func (c *call) scaleApply(o writeOptions, patch []byte) {
	fm := c.scaleFieldManager()
	if fm == nil {
		c.fail(unsupportedPatchType([]string{jsonPatchType, mergePatchType}))
		return
	}
	applied, ok := c.decodeApplied(patch)
	if !ok {
		return
	}
	if k := applied.GetKind(); k != "Scale" || applied.GetAPIVersion() != "autoscaling/v1" {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the object to apply to /scale must be an autoscaling/v1 Scale, not %s %s", applied.GetAPIVersion(), k)))
		return
	}
	if n := applied.GetName(); n != "" && n != c.info.Name {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, c.info.Name)))
		return
	}
	applied.SetName(c.info.Name)
	o.applied = true
	c.updateScale(o, func(scale map[string]any) (map[string]any, error) {
		out, err := fm.Apply(&unstructured.Unstructured{Object: scale}, applied.DeepCopy(), o.manager, o.force)
		if err != nil {
			return nil, applyError(err)
		}
		return out.(*unstructured.Unstructured).Object, nil
	})
}

// scalePatch serves PATCH on /scale: the patch applies to the Scale.
func (c *call) scalePatch(o writeOptions, mt string, patch []byte) {
	c.updateScale(o, func(scale map[string]any) (map[string]any, error) {
		orig, err := appendJSON(nil, scale)
		if err != nil {
			return nil, err
		}
		var patched []byte
		switch mt {
		case jsonPatchType:
			ops, err := jsonpatch.DecodePatch(patch)
			if err != nil {
				return nil, apierrors.NewBadRequest("the JSON patch is malformed: " + err.Error())
			}
			patched, err = ops.Apply(orig)
			if err != nil {
				return nil, patchError(err)
			}
		default:
			if patched, err = jsonpatch.MergePatch(orig, patch); err != nil {
				return nil, patchError(err)
			}
		}
		obj, err := decodeObject(patched)
		if err != nil {
			return nil, err
		}
		return obj.Object, nil
	})
}
