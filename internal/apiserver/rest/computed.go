package rest

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/registry"
)

// createComputed serves a create of a computed kind (Kind.Create): the body is decoded and
// checked like any create body, then the hook computes the answer; nothing is stored.
func (c *call) createComputed() {
	if c.info.Verb != "create" || c.info.Name != "" {
		c.fail(methodNotSupported(c.gr, c.info.Verb))
		return
	}
	if err := acceptsObject(c.r.Header.Get("Accept")); err != nil {
		c.fail(err)
		return
	}
	o, err := c.parseWriteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	obj, err := c.readObjectBody(o)
	if err != nil {
		c.fail(err)
		return
	}
	if err := c.checkNamespace(obj); err != nil {
		c.fail(err)
		return
	}
	out, err := c.kind.Create(c.ctx, obj)
	if err != nil {
		c.fail(err)
		return
	}
	writeJSON(c.w, http.StatusCreated, out.Object)
}

// createSubresource serves a create of a computed subresource (Kind.Subresources), whose
// request and response objects are of the subresource's own kind.
func (c *call) createSubresource(sr *registry.Subresource) {
	if err := acceptsObject(c.r.Header.Get("Accept")); err != nil {
		c.fail(err)
		return
	}
	o, err := c.parseWriteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	body, err := readBody(c.r)
	if err != nil {
		c.fail(err)
		return
	}
	data, err := bodyJSON(c.r.Header.Get("Content-Type"), body, sr.NewTyped != nil)
	if err != nil {
		c.fail(err)
		return
	}
	obj, err := decodeObject(data)
	if err != nil {
		c.fail(err)
		return
	}
	gv := schema.GroupVersion{Group: sr.Group, Version: sr.Version}.String()
	if av := obj.GetAPIVersion(); av == "" {
		obj.SetAPIVersion(gv)
	} else if av != gv {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, gv)))
		return
	}
	if k := obj.GetKind(); k == "" {
		obj.SetKind(sr.Kind)
	} else if k != sr.Kind {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", k, sr.Kind)))
		return
	}
	if sr.NewTyped != nil {
		if err := checkTypedFields(c, o, sr.Kind, sr.Version, sr.NewTyped(), data); err != nil {
			c.fail(err)
			return
		}
	}
	if err := c.admitSubresource(sr, obj, o.dryRun); err != nil {
		c.fail(err)
		return
	}
	out, err := sr.Create(c.ctx, c.objNamespace(), c.info.Name, obj)
	if err != nil {
		c.fail(err)
		return
	}
	writeJSON(c.w, http.StatusCreated, out.Object)
}

// admitSubresource runs mutating and validating admission on the body of a subresource
// create (a Binding, an Eviction, a TokenRequest), as kube-apiserver's create handler does
// for every create: its kind is the body's, its resource and subresource the URL's. So
// PodTopologyLabels copies the node's zone and region onto a Binding, and webhooks and
// policies registered for pods/eviction or pods/binding are called.
func (c *call) admitSubresource(sr *registry.Subresource, obj *unstructured.Unstructured, dryRun bool) error {
	if c.h.admission == nil {
		return nil
	}
	a := c.attributes(admission.Create, obj, nil, dryRun)
	a.Kind = schema.GroupVersionKind{Group: sr.Group, Version: sr.Version, Kind: sr.Kind}
	a.Name = c.info.Name
	// The pod's type converter does not describe the body's kind; policies deduce its types.
	a.TypeConverter = nil
	if err := admissionError(c.h.admission.Admit(c.admissionContext(), a), c); err != nil {
		return err
	}
	return admissionError(c.h.admission.Validate(c.admissionContext(), a), c)
}

// checkTypedFields applies fieldValidation to a body of a Go type other than the call's kind.
func checkTypedFields(c *call, o writeOptions, kind, version string, typed runtime.Object, data []byte) error {
	errs, err := kjson.UnmarshalStrict(data, typed)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind, version, kind, err))
	}
	if len(errs) == 0 || o.fieldValidation == "Ignore" {
		return nil
	}
	if o.fieldValidation == "Strict" {
		return apierrors.NewBadRequest(strictMessage(errs))
	}
	for _, e := range errs {
		addWarning(c.w, e.Error())
	}
	return nil
}

// readComputed serves a get or list of a kind whose reads are computed (Kind.Read):
// nothing is read from storage. A list is filtered by its label and field selectors and
// carries no resourceVersion, as upstream's ComponentStatus list; it is never paged.
func (c *call) readComputed() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	switch {
	case c.info.Verb == "get" && c.info.Subresource == "":
		obj, err := c.kind.Read.Get(c.ctx, c.info.Name)
		if err != nil {
			c.fail(err)
			return
		}
		c.writeObject(http.StatusOK, obj, out)
	case c.info.Verb == "list" && c.info.Subresource == "":
		p, err := c.parseListParams(c.r.URL.Query())
		if err != nil {
			c.fail(err)
			return
		}
		all, err := c.kind.Read.List(c.ctx)
		if err != nil {
			c.fail(err)
			return
		}
		items := make([]*unstructured.Unstructured, 0, len(all))
		for _, o := range all {
			if p.pred.Empty() || p.pred.Matches(o) {
				items = append(items, o)
			}
		}
		c.writeListAs(out, metav1.ListMeta{}, items)
	default:
		c.fail(methodNotSupported(c.gr, c.info.Verb))
	}
}
