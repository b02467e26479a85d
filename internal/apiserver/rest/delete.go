package rest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

// Finalizers the garbage collector acts on; the delete path adds them for the Foreground and
// Orphan propagation policies when a garbage collector runs.
const (
	FinalizerForeground = metav1.FinalizerDeleteDependents
	FinalizerOrphan     = metav1.FinalizerOrphanDependents
)

// deleteOptions reads DeleteOptions from the body (JSON or protobuf, possibly empty) and the
// query parameters, and validates them.
func (c *call) deleteOptions() (*metav1.DeleteOptions, writeOptions, error) {
	opts := &metav1.DeleteOptions{}
	wo, err := c.parseWriteOptions()
	if err != nil {
		return nil, wo, err
	}
	body, err := readBody(c.r)
	if err != nil {
		return nil, wo, err
	}
	if len(body) > 0 {
		data, err := bodyJSON(c.r.Header.Get("Content-Type"), body, true)
		if err != nil {
			return nil, wo, err
		}
		if err := json.Unmarshal(data, opts); err != nil {
			return nil, wo, apierrors.NewBadRequest("the body is not valid DeleteOptions: " + err.Error())
		}
	}
	q := c.r.URL.Query()
	if s := q.Get("gracePeriodSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, wo, apierrors.NewBadRequest("invalid gracePeriodSeconds: " + s)
		}
		opts.GracePeriodSeconds = &n
	}
	if s := q.Get("propagationPolicy"); s != "" {
		p := metav1.DeletionPropagation(s)
		opts.PropagationPolicy = &p
	}
	if s := q.Get("orphanDependents"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, wo, apierrors.NewBadRequest("invalid orphanDependents: " + s)
		}
		opts.OrphanDependents = &b //nolint:staticcheck // still sent by old clients
	}
	if len(opts.DryRun) > 0 {
		for _, d := range opts.DryRun {
			if d != metav1.DryRunAll {
				return nil, wo, invalid(c, "dryRun", d, "supported values: \"All\"")
			}
		}
		wo.dryRun = true
	}
	var errs field.ErrorList
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("propagationPolicy"), string(*p), []string{string(metav1.DeletePropagationForeground), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan)}))
		}
		if opts.OrphanDependents != nil { //nolint:staticcheck
			errs = append(errs, field.Invalid(field.NewPath("propagationPolicy"), string(*p), "orphanDependents and deletionPropagation cannot be both set"))
		}
	}
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(field.NewPath("gracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	if len(errs) > 0 {
		return nil, wo, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("DeleteOptions").GroupKind(), "", errs)
	}
	return opts, wo, nil
}

func (c *call) delete() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	opts, wo, err := c.deleteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	obj, gone, err := c.deleteObject(c.key(), opts, wo)
	if err != nil {
		c.fail(err)
		return
	}
	if !gone {
		c.writeObject(http.StatusOK, obj, out)
		return
	}
	writeJSON(c.w, http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: obj.GetName(), Group: c.kind.Group, Kind: c.kind.Resource, UID: obj.GetUID()},
	})
}

// deleteObject deletes one object. When finalizers (its own, or the garbage collector's for
// the Foreground and Orphan policies) hold it back, it only gets its deletionTimestamp and
// gone is false; obj is then the object as it now stands.
func (c *call) deleteObject(key string, opts *metav1.DeleteOptions, wo writeOptions) (obj *unstructured.Unstructured, gone bool, err error) {
	var pre *storage.Preconditions
	if p := opts.Preconditions; p != nil {
		pre = &storage.Preconditions{}
		if p.UID != nil {
			pre.UID = *p.UID
		}
		if p.ResourceVersion != nil {
			pre.ResourceVersion = *p.ResourceVersion
		}
	}
	cur, err := c.h.store.Get(c.ctx, key)
	if err != nil {
		return nil, false, statusError(err, c.gr, c.info.Name)
	}
	if pre != nil {
		if (pre.UID != "" && pre.UID != cur.GetUID()) || (pre.ResourceVersion != "" && pre.ResourceVersion != cur.GetResourceVersion()) {
			return nil, false, statusError(&storage.Error{Kind: storage.ErrConflict, Key: key, Detail: preconditionMessage(pre, cur)}, c.gr, cur.GetName())
		}
	}
	if c.h.admission != nil {
		old, err := c.fromStorage1(cur)
		if err != nil {
			return nil, false, err
		}
		// Mutating admission sees deletes too (NamespaceLifecycle refuses deleting the
		// immortal namespaces there), as upstream's delete handler runs it.
		if err := c.admit(admission.Delete, nil, old, wo.dryRun); err != nil {
			return nil, false, err
		}
		if err := c.validateAdmission(admission.Delete, nil, old, wo.dryRun); err != nil {
			return nil, false, err
		}
	}
	gcFinalizer := c.gcFinalizer(opts)
	holder, _ := c.kind.StrategyOrDefault().(DeletionHolder)
	// Graceful deletion (pods): the object stays for its grace period, until a delete with
	// grace 0 (its node's, once it stopped it) removes it.
	graceful, _ := c.kind.StrategyOrDefault().(registry.GracefulDeleter)
	var grace int64
	shorten := false
	if graceful != nil {
		grace = graceful.GracePeriod(cur, opts.GracePeriodSeconds)
		if cur.GetDeletionTimestamp() != nil {
			cg := cur.GetDeletionGracePeriodSeconds()
			if cg != nil && *cg > 0 && (opts.GracePeriodSeconds == nil || grace >= *cg) && gcFinalizer == "" {
				// Already being deleted, no sooner than asked: nothing changes.
				out, err := c.fromStorage1(cur)
				return out, false, err
			}
			shorten = cg != nil && grace < *cg
		}
	}
	pending := len(cur.GetFinalizers()) > 0 || gcFinalizer != "" || (holder != nil && holder.HoldsDeletion(cur)) || grace > 0
	if !pending {
		if wo.dryRun {
			out, err := c.fromStorage1(cur)
			return out, true, err
		}
		last, err := c.h.store.Delete(c.ctx, key, storage.DeleteOptions{Preconditions: &storage.Preconditions{UID: cur.GetUID(), ResourceVersion: cur.GetResourceVersion()}})
		if errors.Is(err, storage.ErrConflict) {
			// Changed since we read it (perhaps it gained a finalizer): decide again.
			return c.deleteObject(key, opts, wo)
		}
		if err != nil {
			return nil, false, statusError(err, c.gr, c.info.Name)
		}
		c.afterDelete(last)
		out, err := c.fromStorage1(last)
		return out, true, err
	}
	mark := func(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		if obj.GetDeletionTimestamp() == nil {
			at := metav1.NewTime(c.h.now().UTC().Add(time.Duration(grace) * time.Second))
			obj.SetDeletionTimestamp(&at)
			g := grace
			obj.SetDeletionGracePeriodSeconds(&g)
			if c.kind.Generation || obj.GetGeneration() > 0 {
				obj.SetGeneration(obj.GetGeneration() + 1)
			}
			if holder != nil {
				holder.PrepareForDelete(obj)
			}
		} else if shorten {
			// As upstream: the deadline moves by the difference of the grace periods.
			old := obj.GetDeletionGracePeriodSeconds()
			at := metav1.NewTime(obj.GetDeletionTimestamp().Add(time.Duration(grace-*old) * time.Second))
			obj.SetDeletionTimestamp(&at)
			g := grace
			obj.SetDeletionGracePeriodSeconds(&g)
		}
		if gcFinalizer != "" {
			fins := obj.GetFinalizers()
			out := fins[:0:0]
			for _, f := range fins {
				if f != FinalizerForeground && f != FinalizerOrphan {
					out = append(out, f)
				}
			}
			obj.SetFinalizers(append(out, gcFinalizer))
		}
		return obj, nil
	}
	if wo.dryRun {
		o, _ := mark(cur.DeepCopy())
		out, err := c.fromStorage1(o)
		return out, false, err
	}
	updated, err := c.h.store.GuaranteedUpdate(c.ctx, key, storage.UpdateOptions{Preconditions: &storage.Preconditions{UID: cur.GetUID()}, Current: cur}, mark)
	if err != nil {
		return nil, false, statusError(err, c.gr, c.info.Name)
	}
	c.hintCollector(updated)
	out, err := c.fromStorage1(updated)
	return out, false, err
}

// gcFinalizer is the finalizer the propagation policy asks for, when a garbage collector
// runs to act on it.
func (c *call) gcFinalizer(opts *metav1.DeleteOptions) string {
	if !c.h.gc {
		return ""
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationForeground:
			return FinalizerForeground
		case metav1.DeletePropagationOrphan:
			return FinalizerOrphan
		}
		return ""
	}
	if o := opts.OrphanDependents; o != nil && *o { //nolint:staticcheck
		return FinalizerOrphan
	}
	return ""
}

func preconditionMessage(pre *storage.Preconditions, cur *unstructured.Unstructured) string {
	if pre.UID != "" && pre.UID != cur.GetUID() {
		return "Precondition failed: UID in precondition: " + string(pre.UID) + ", UID in object meta: " + string(cur.GetUID())
	}
	return "Precondition failed: ResourceVersion in precondition: " + pre.ResourceVersion + ", ResourceVersion in object meta: " + cur.GetResourceVersion()
}

func (c *call) deleteCollection() {
	opts, wo, err := c.deleteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	p, err := c.parseListParams(c.r.URL.Query())
	if err != nil {
		c.fail(err)
		return
	}
	res, err := c.h.store.List(c.ctx, c.listPrefix(), storage.ListOptions{Predicate: p.pred})
	if err != nil {
		c.fail(err)
		return
	}
	items := make([]any, 0, len(res.Items))
	for _, it := range res.Items {
		obj, _, err := c.deleteObject(c.kind.Key(it.GetNamespace(), it.GetName()), opts, wo)
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			c.fail(err)
			return
		}
		items = append(items, obj.Object)
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"kind": c.kind.ListKind, "apiVersion": c.kind.APIVersion(), "metadata": map[string]any{"resourceVersion": strconv.FormatInt(res.Revision, 10)}, "items": items})
}
