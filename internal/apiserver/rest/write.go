package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

func fieldErrs(fld, value, msg string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(fld), value, msg)}
}

// writeOptions are the query parameters every write understands.
type writeOptions struct {
	dryRun          bool
	fieldValidation string
	// manager names the writer in managedFields (fieldManager, or the User-Agent).
	manager string
	// force takes over the fields of other managers on apply.
	force bool
	// applied: the object already went through server-side apply's field manager.
	applied bool
}

func (c *call) parseWriteOptions() (writeOptions, error) {
	q := c.r.URL.Query()
	var o writeOptions
	var errs field.ErrorList
	for _, d := range q["dryRun"] {
		if d != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun"), d, []string{metav1.DryRunAll}))
		}
		o.dryRun = true
	}
	switch fv := q.Get("fieldValidation"); fv {
	case "", "Warn", "Strict", "Ignore":
		o.fieldValidation = fv
		if fv == "" {
			o.fieldValidation = "Warn"
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("fieldValidation"), fv, []string{"", "Ignore", "Strict", "Warn"}))
	}
	errs = append(errs, validateFieldManager(q.Get("fieldManager"))...)
	o.manager = managerOf(q.Get("fieldManager"), c.r.UserAgent())
	switch f := q.Get("force"); f {
	case "", "false":
	case "true":
		o.force = true
	default:
		errs = append(errs, field.Invalid(field.NewPath("force"), f, "must be true or false"))
	}
	if len(errs) > 0 {
		return o, optionsInvalid(c.info.Verb, errs)
	}
	return o, nil
}

// optionsInvalid is the 422 for bad query parameters of a write, named after the options
// kind that carries them (CreateOptions, UpdateOptions, ...) as kube-apiserver names it.
func optionsInvalid(verb string, errs field.ErrorList) error {
	kind := map[string]string{"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions", "delete": "DeleteOptions", "deletecollection": "DeleteOptions"}[verb]
	return apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind(kind).GroupKind(), "", errs)
}

// checkFields applies fieldValidation to a body: unknown or duplicate fields fail the request
// under Strict and become Warning headers under Warn.
//
// A body a built-in kind's Go type cannot hold at all (a number where a string belongs) is
// refused under every fieldValidation with 400, as kube-apiserver's decoder refuses it.
//
// It reports whether the body had unknown or duplicate fields: for a built-in kind the
// caller then rebuilds the object through its Go type (withoutUnknownFields).
func (c *call) checkFields(o writeOptions, data []byte, prefix string) (bool, error) {
	errs, decodeErr := c.fieldErrors(data)
	if decodeErr != nil {
		return false, apierrors.NewBadRequest(decodeErr.Error())
	}
	return len(errs) > 0, c.applyFieldValidation(o, errs, prefix)
}

// withoutUnknownFields decodes a body of a built-in kind through its Go type, which drops the
// fields the type does not have (and keeps the last of duplicates), as kube-apiserver's
// decoder does: they are neither stored nor seen by the field manager. The apiVersion and
// kind are checked's, the body already decoded and checked (nil: the body's own).
func (c *call) withoutUnknownFields(data []byte, checked *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	typed := c.kind.NewTyped()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, typed); err != nil {
		return nil, apierrors.NewBadRequest(c.undecodable() + err.Error())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil, apierrors.NewBadRequest(c.undecodable() + err.Error())
	}
	obj := &unstructured.Unstructured{Object: m}
	if checked != nil {
		obj.SetAPIVersion(checked.GetAPIVersion())
		obj.SetKind(checked.GetKind())
	}
	return obj, nil
}

// applyFieldValidation fails the request with the unknown or duplicate fields errs under
// Strict (the message starts with prefix) and adds them as Warning headers under Warn.
func (c *call) applyFieldValidation(o writeOptions, errs []error, prefix string) error {
	if len(errs) == 0 || o.fieldValidation == "Ignore" {
		return nil
	}
	if o.fieldValidation == "Strict" {
		return apierrors.NewBadRequest(prefix + strictMessage(errs))
	}
	for _, e := range errs {
		addWarning(c.w, e.Error())
	}
	return nil
}

// fieldErrors splits what strictErrors finds into the unknown and duplicate fields and the
// error that made the body undecodable, if any.
func (c *call) fieldErrors(data []byte) (fieldErrs []error, decodeErr error) {
	for _, e := range strictErrors(c.kind, data) {
		if _, ok := e.(kjson.FieldError); ok {
			fieldErrs = append(fieldErrs, e)
		} else if decodeErr == nil {
			decodeErr = fmt.Errorf("%s%w", c.undecodable(), e)
		}
	}
	return fieldErrs, decodeErr
}

// undecodable starts upstream's message for a create or update body the kind cannot take
// (under fieldValidation Strict: unknown or duplicate fields).
func (c *call) undecodable() string {
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: ", c.kind.Kind, c.kind.Version, c.kind.Kind)
}

func strictMessage(errs []error) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return "strict decoding error: " + strings.Join(msgs, ", ")
}

func addWarning(w http.ResponseWriter, text string) {
	w.Header().Add("Warning", `299 - "`+strings.ReplaceAll(strings.ReplaceAll(text, `\`, `\\`), `"`, `\"`)+`"`)
}

// readObjectBody reads and decodes a create or update body.
func (c *call) readObjectBody(o writeOptions) (*unstructured.Unstructured, error) {
	body, err := readBody(c.r)
	if err != nil {
		return nil, err
	}
	pruner, prunes := c.kind.StrategyOrDefault().(registry.UnknownFieldPruner)
	var obj *unstructured.Unstructured
	var data []byte
	var dups []error
	if prunes && o.fieldValidation != "Ignore" {
		// Custom resources: one pass finds the duplicate fields; the unknown ones are
		// found on the decoded object below.
		if data, err = bodyJSON(c.r.Header.Get("Content-Type"), body, false); err != nil {
			return nil, err
		}
		obj, dups, err = decodeObjectDuplicates(data)
	} else {
		obj, data, err = decodeBody(c.r.Header.Get("Content-Type"), body, c.kind.NewTyped != nil)
	}
	if err != nil {
		return nil, err
	}
	if err := c.checkTypeMeta(obj); err != nil {
		return nil, err
	}
	// The audit request object is the body as sent, even when unknown fields are pruned
	// from obj below.
	var audited map[string]any
	a := request.AuditFrom(c.ctx)
	if a != nil && a.WantRequest {
		audited = obj.DeepCopy().Object
	}
	if prunes {
		// Custom resources: the unknown fields of the decoded body, without decoding it again
		// (the strategy would prune them anyway).
		if err := c.applyFieldValidation(o, append(dups, pruner.PruneUnknownFields(obj.Object)...), c.undecodable()); err != nil {
			return nil, err
		}
	} else if data != nil {
		// Not protobuf (data is nil for a protobuf body, decoded into its Go type: it cannot
		// carry unknown or duplicate fields).
		unknown, err := c.checkFields(o, data, c.undecodable())
		if err != nil {
			return nil, err
		}
		if unknown && c.kind.NewTyped != nil {
			if obj, err = c.withoutUnknownFields(data, obj); err != nil {
				return nil, err
			}
		}
	}
	if audited != nil {
		a.SetRequestObject(audited)
	}
	return obj, nil
}

// checkTypeMeta fills a missing apiVersion and kind from the URL and refuses ones that
// disagree with it.
func (c *call) checkTypeMeta(obj *unstructured.Unstructured) error {
	av, k := obj.GetAPIVersion(), obj.GetKind()
	if av == "" {
		obj.SetAPIVersion(c.kind.APIVersion())
	} else if av != c.kind.APIVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, c.kind.APIVersion()))
	}
	if k == "" {
		obj.SetKind(c.kind.Kind)
	} else if k != c.kind.Kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", k, c.kind.Kind))
	}
	return nil
}

// checkNamespace makes the object's namespace agree with the URL.
func (c *call) checkNamespace(obj *unstructured.Unstructured) error {
	ns := obj.GetNamespace()
	if !c.kind.Namespaced {
		if ns != "" {
			obj.SetNamespace("")
		}
		return nil
	}
	if ns == "" {
		obj.SetNamespace(c.info.Namespace)
	} else if ns != c.info.Namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

func (c *call) validate(obj, old *unstructured.Unstructured) error {
	st := c.kind.StrategyOrDefault()
	if cs, ok := st.(registry.ContextStrategy); ok {
		c.validated = &registry.Validated{}
		if c.admitted.For(obj.Object) {
			*c.validated = *c.admitted
		}
		c.admitted = nil
		ctx := registry.WithValidated(c.admissionContext(), c.validated)
		if old == nil {
			return cs.ValidateCreateContext(ctx, obj)
		}
		if old.GetDeletionTimestamp() != nil {
			if errs := noNewFinalizers(obj, old); len(errs) > 0 {
				return apierrors.NewInvalid(c.kind.GVK().GroupKind(), obj.GetName(), errs)
			}
		}
		return cs.ValidateUpdateContext(ctx, obj, old, c.info.Subresource)
	}
	var errs field.ErrorList
	var typed runtime.Object
	tv, _ := st.(registry.TypedValidator)
	switch sv, _ := st.(registry.StatusValidator); {
	case old == nil && tv != nil:
		typed, errs = tv.ValidateTyped(obj)
	case old == nil:
		errs = st.Validate(obj)
	case sv != nil && c.info.Subresource == "status":
		errs = sv.ValidateStatusUpdate(obj, old)
	case tv != nil:
		typed, errs = tv.ValidateUpdateTyped(obj, old)
	default:
		errs = st.ValidateUpdate(obj, old)
	}
	if old != nil && old.GetDeletionTimestamp() != nil {
		errs = append(errs, noNewFinalizers(obj, old)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(c.kind.GVK().GroupKind(), obj.GetName(), errs)
	}
	c.validated = nil
	if typed != nil {
		c.validated = &registry.Validated{Content: obj.Object, Versioned: typed}
	}
	return nil
}

func noNewFinalizers(obj, old *unstructured.Unstructured) field.ErrorList {
	had := map[string]bool{}
	for _, f := range old.GetFinalizers() {
		had[f] = true
	}
	var errs field.ErrorList
	for _, f := range obj.GetFinalizers() {
		if !had[f] {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "finalizers"), fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers []string{%q}", f)))
		}
	}
	return errs
}

func (c *call) create() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	if c.info.Name != "" {
		c.fail(methodNotSupported(c.gr, "create"))
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
	created, code, err := c.createObject(obj, o)
	if err != nil {
		c.fail(err)
		return
	}
	c.writeObject(code, created, out)
}

// createObject runs the create path for obj: metadata, strategy, validation, namespace
// lifecycle, storage.
func (c *call) createObject(obj *unstructured.Unstructured, o writeOptions) (created *unstructured.Unstructured, code int, err error) {
	if err := c.checkNamespace(obj); err != nil {
		return nil, 0, err
	}
	c.info.Name = obj.GetName()
	generated := obj.GetName() == "" && obj.GetGenerateName() != ""
	if fm := c.fieldManager(); fm != nil && !o.applied {
		// The fields the creator set are its own, before defaults, as upstream.
		live, _ := (&kindConvertor{}).New(c.kind.GVK())
		obj = fm.UpdateNoErrors(live, obj, o.manager).(*unstructured.Unstructured)
	}
	c.prepareCreate(obj)
	if err := c.admit(admission.Create, obj, nil, o.dryRun); err != nil {
		return nil, 0, err
	}
	if a := c.kind.Allocator; a != nil {
		c.admitted = nil // allocators change the object in place
		finish, err := a.BeginCreate(c.ctx, obj, o.dryRun)
		if err != nil {
			return nil, 0, err
		}
		stored := false
		defer func() { finish(context.WithoutCancel(c.ctx), stored) }()
		defer func() { stored = created != nil && !o.dryRun }()
	}
	if err := c.validate(obj, nil); err != nil {
		return nil, 0, err
	}
	if err := c.validateAdmission(admission.Create, obj, nil, o.dryRun); err != nil {
		return nil, 0, err
	}
	if err := c.checkNamespaceLifecycle(obj.GetNamespace()); err != nil {
		return nil, 0, err
	}
	if o.dryRun {
		return obj, http.StatusCreated, nil
	}
	stored, err := c.toStorage(obj)
	if err != nil {
		return nil, 0, err
	}
	for attempt := 0; ; attempt++ {
		created, err := c.h.store.Create(c.ctx, c.kind.Key(stored.GetNamespace(), stored.GetName()), stored)
		if err == nil && stored != obj {
			// Converted for storage: back to the request's version. Otherwise the object is
			// already what FromStorage would return (see registry.Kind.ToStorage).
			created, err = c.fromStorage1(created)
		}
		if err != nil && generated && attempt < 4 && errors.Is(err, storage.ErrAlreadyExists) {
			stored.SetName(stored.GetGenerateName() + utilrand.String(5))
			c.validated = nil // the typed forms carry the name tried first
			continue
		}
		if err != nil {
			return nil, 0, statusError(err, c.gr, obj.GetName())
		}
		c.hintCollector(created)
		return created, http.StatusCreated, nil
	}
}

// prepareCreate sets the metadata the server owns on a new object.
func (c *call) prepareCreate(obj *unstructured.Unstructured) {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		obj.SetName(obj.GetGenerateName() + utilrand.String(5))
	}
	obj.SetUID(types.UID(uuid.NewString()))
	obj.SetCreationTimestamp(metav1.NewTime(c.h.now().UTC()))
	obj.SetResourceVersion("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
	if c.kind.Generation {
		obj.SetGeneration(1)
	} else {
		obj.SetGeneration(0)
	}
	if _, upstream := c.kind.StrategyOrDefault().(registry.ContextStrategy); c.kind.Status && !upstream {
		// Upstream's strategies decide themselves: a Pod's resets status, a Node's keeps what
		// its kubelet registers with.
		unstructured.RemoveNestedField(obj.Object, "status")
	}
	c.prepared = nil
	if tp, ok := c.kind.StrategyOrDefault().(registry.TypedPreparer); ok {
		if ext := tp.PrepareForCreateTyped(obj); ext != nil {
			c.prepared = &registry.Validated{Content: obj.Object, Versioned: ext}
		}
		return
	}
	c.kind.StrategyOrDefault().PrepareForCreate(obj)
}

// prepareUpdate makes obj, the proposed new state, a valid successor of old: server-owned
// metadata is kept, the status subresource split is enforced and generation moves when
// anything but metadata and status changed.
func (c *call) prepareUpdate(obj, old *unstructured.Unstructured) *unstructured.Unstructured {
	switch {
	case c.info.Subresource == "status":
		next := old.DeepCopy()
		if c.statusWritesMetadata() {
			if md, ok := obj.Object["metadata"]; ok {
				next.Object["metadata"] = md // server-owned fields are restored below
			}
		}
		if st, ok := obj.Object["status"]; ok {
			next.Object["status"] = st
		} else {
			delete(next.Object, "status")
		}
		if c.fieldManager() != nil {
			// The status field manager recorded the writer's status fields.
			next.SetManagedFields(obj.GetManagedFields())
		}
		obj = next
	case c.kind.FieldSubresources[c.info.Subresource] != nil:
		fs := c.kind.FieldSubresources[c.info.Subresource]
		next := old.DeepCopy()
		for _, path := range fs.Fields {
			if v, ok, _ := unstructured.NestedFieldCopy(obj.Object, path...); ok {
				_ = unstructured.SetNestedField(next.Object, v, path...)
			} else {
				unstructured.RemoveNestedField(next.Object, path...)
			}
		}
		if c.fieldManager() != nil {
			next.SetManagedFields(obj.GetManagedFields())
		}
		if fs.Prepare != nil {
			fs.Prepare(next, old)
		}
		obj = next
	case c.info.Subresource == "finalize":
		next := old.DeepCopy()
		fin, _, _ := unstructured.NestedFieldCopy(obj.Object, "spec", "finalizers")
		if fin == nil {
			unstructured.RemoveNestedField(next.Object, "spec", "finalizers")
		} else {
			_ = unstructured.SetNestedField(next.Object, fin, "spec", "finalizers")
		}
		obj = next
	case c.kind.Status:
		if st, ok := old.Object["status"]; ok {
			obj.Object["status"] = st
		} else {
			delete(obj.Object, "status")
		}
	}
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	obj.SetNamespace(old.GetNamespace())
	obj.SetName(old.GetName())
	obj.SetSelfLink("")
	obj.SetResourceVersion(old.GetResourceVersion())
	gen := old.GetGeneration()
	if c.kind.Generation && specChanged(obj, old) {
		gen++
	}
	obj.SetGeneration(gen)
	if c.info.Subresource == "" {
		// The strategy adjusts writes of the whole object. A subresource write is already
		// the stored object with only the subresource's fields replaced; running the
		// strategy would undo it (a namespace's strategy keeps the stored
		// spec.finalizers, which is what the finalize subresource changes).
		c.prepared = nil
		if tp, ok := c.kind.StrategyOrDefault().(registry.TypedPreparer); ok {
			if ext := tp.PrepareForUpdateTyped(obj, old); ext != nil {
				c.prepared = &registry.Validated{Content: obj.Object, Versioned: ext}
			}
		} else {
			c.kind.StrategyOrDefault().PrepareForUpdate(obj, old)
		}
	}
	return obj
}

// statusWritesMetadata says a status write keeps the request's metadata
// (registry.Kind.StatusWritesMetadata).
func (c *call) statusWritesMetadata() bool {
	if c.kind.StatusWritesMetadata {
		return true
	}
	_, upstream := c.kind.StrategyOrDefault().(registry.ContextStrategy)
	return upstream
}

// specChanged reports whether anything but metadata and status differs.
func specChanged(a, b *unstructured.Unstructured) bool {
	for k, v := range a.Object {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if !reflect.DeepEqual(v, b.Object[k]) {
			return true
		}
	}
	for k := range b.Object {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if _, ok := a.Object[k]; !ok {
			return true
		}
	}
	return false
}

func (c *call) update() {
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
	if c.info.Subresource == "scale" {
		c.scaleUpdate(o)
		return
	}
	obj, err := c.readObjectBody(o)
	if err != nil {
		c.fail(err)
		return
	}
	if obj.GetName() == "" {
		obj.SetName(c.info.Name)
	} else if obj.GetName() != c.info.Name {
		c.fail(apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), c.info.Name)))
		return
	}
	if err := c.checkNamespace(obj); err != nil {
		c.fail(err)
		return
	}
	var pre *storage.Preconditions
	if rv := obj.GetResourceVersion(); rv != "" {
		if _, err := storage.ParseRevision(rv); err != nil {
			c.fail(invalid(c, "metadata.resourceVersion", rv, "must be a resource version returned by the server"))
			return
		}
		pre = &storage.Preconditions{ResourceVersion: rv}
	}
	unconditional := pre == nil && !c.kind.AllowsUnconditionalUpdate()
	updated, err := c.updateObject(pre, o, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		if unconditional {
			// Checked once the object is known to exist (a missing one is a 404), as upstream.
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: c.gr.Group, Kind: c.gr.Resource}, c.info.Name, field.ErrorList{
				field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update")})
		}
		return obj.DeepCopy(), nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.writeObject(http.StatusOK, updated, out)
}

// updateObject is the read-modify-write of update and patch: next computes the proposed
// state from the current one; the handler then enforces metadata, strategy and validation.
// An object being deleted whose last finalizer goes is deleted.
func (c *call) updateObject(pre *storage.Preconditions, o writeOptions, next func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error)) (_ *unstructured.Unstructured, retErr error) {
	// The kind's allocator runs between mutating admission and validation, as upstream's
	// BeginUpdate hook; each attempt reserves anew, an attempt that is retried or fails
	// releases what it reserved, the one stored releases what the old object held.
	var pending func(context.Context, bool)
	settle := func(stored bool) {
		if pending != nil {
			pending(context.WithoutCancel(c.ctx), stored)
			pending = nil
		}
	}
	defer func() { settle(retErr == nil && !o.dryRun) }()
	// cur arrives in the storage version; the request works in its own version.
	fn := func(stored *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		settle(false)
		cur, err := c.fromStorage1(stored)
		if err != nil {
			return nil, err
		}
		proposed, err := next(cur)
		if err != nil {
			return nil, err
		}
		if fm := c.fieldManager(); fm != nil && !o.applied {
			proposed = fm.UpdateNoErrors(cur, proposed, o.manager).(*unstructured.Unstructured)
		}
		obj := c.prepareUpdate(proposed, cur)
		if err := c.admit(admission.Update, obj, cur, o.dryRun); err != nil {
			return nil, err
		}
		if a := c.kind.Allocator; a != nil {
			c.admitted = nil // allocators change the object in place
			finish, err := a.BeginUpdate(c.ctx, obj, cur, o.dryRun)
			if err != nil {
				return nil, err
			}
			pending = finish
		}
		if err := c.validate(obj, cur); err != nil {
			return nil, err
		}
		if err := c.validateAdmission(admission.Update, obj, cur, o.dryRun); err != nil {
			return nil, err
		}
		if deleteDuringUpdate(cur, obj, c.holdsDeletion) {
			return nil, &emptiedHolds{stored: stored}
		}
		if o.dryRun {
			return obj, nil
		}
		return c.toStorage(obj)
	}
	key := c.key()
	if o.dryRun {
		cur, err := c.h.store.Get(c.ctx, key)
		if err != nil {
			return nil, statusError(err, c.gr, c.info.Name)
		}
		if pre != nil && pre.ResourceVersion != cur.GetResourceVersion() {
			return nil, statusError(&storage.Error{Kind: storage.ErrConflict, Key: key}, c.gr, c.info.Name)
		}
		out, err := fn(cur)
		var emptied *emptiedHolds
		if errors.As(err, &emptied) {
			// What the delete would remove, as upstream's dry-run delete answers.
			return c.fromStorage1(emptied.stored)
		}
		return out, err
	}
	// Start from the watch cache's copy when it has one: a fresh copy saves the read from
	// etcd, a stale one costs only a retry (the write is a compare-and-swap either way).
	var current *unstructured.Unstructured
	if cached, err := c.h.caches.Get(c.kind.Prefix(), c.kind.AttrFunc()).Get(c.ctx, key, 0); err == nil {
		current = cached
	}
	for {
		updated, err := c.h.store.GuaranteedUpdate(c.ctx, key, storage.UpdateOptions{Preconditions: pre, Current: current}, fn)
		var emptied *emptiedHolds
		if errors.As(err, &emptied) {
			// The update would release the object's last hold: it is deleted instead, in
			// one DELETED event, if nothing wrote it meanwhile (else the update runs again
			// on what is there now).
			last, err := c.h.store.Delete(c.ctx, key, storage.DeleteOptions{Preconditions: &storage.Preconditions{
				UID: emptied.stored.GetUID(), ResourceVersion: emptied.stored.GetResourceVersion()}})
			if errors.Is(err, storage.ErrConflict) && c.ctx.Err() == nil {
				current = nil
				continue
			}
			if err != nil {
				return nil, statusError(err, c.gr, c.info.Name)
			}
			settle(false)
			c.afterDelete(last)
			return c.fromStorage1(last)
		}
		if err != nil {
			return nil, statusError(err, c.gr, c.info.Name)
		}
		c.hintCollector(updated)
		return c.fromStorage1(updated)
	}
}

// emptiedHolds stops an update that would remove the last hold (finalizer) of an object
// being deleted: stored is the object as it is stored now.
type emptiedHolds struct{ stored *unstructured.Unstructured }

func (*emptiedHolds) Error() string {
	return "the update removes the last finalizer of an object being deleted"
}

// deleteDuringUpdate says whether an update of cur to obj deletes the object instead, as
// kube-apiserver's store decides (genericregistry.Store.shouldDeleteDuringUpdate): its
// deletion was requested, the update leaves nothing holding it, and no grace period runs
// (a pod being stopped by its kubelet stays until the kubelet's final delete).
func deleteDuringUpdate(cur, obj *unstructured.Unstructured, holds func(*unstructured.Unstructured) bool) bool {
	if cur.GetDeletionTimestamp() == nil || holds(obj) {
		return false
	}
	g := cur.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

// hintCollector tells the garbage collector about a stored object that has
// ownerReferences or one of its finalizers.
func (c *call) hintCollector(obj *unstructured.Unstructured) {
	if c.h.gcHint == nil || obj == nil {
		return
	}
	md, _ := obj.Object["metadata"].(map[string]any)
	if refs, _ := md["ownerReferences"].([]any); len(refs) > 0 {
		c.h.gcHint(c.gr)
		return
	}
	fins, _ := md["finalizers"].([]any)
	for _, f := range fins {
		if f == FinalizerOrphan || f == FinalizerForeground {
			c.h.gcHint(c.gr)
			return
		}
	}
}

// holdsDeletion reports whether something still holds a deleted object back: a finalizer,
// or what the kind's strategy adds (a namespace's spec.finalizers).
func (c *call) holdsDeletion(obj *unstructured.Unstructured) bool {
	if len(obj.GetFinalizers()) > 0 {
		return true
	}
	if d, ok := c.kind.StrategyOrDefault().(DeletionHolder); ok {
		return d.HoldsDeletion(obj)
	}
	return false
}

// DeletionHolder is implemented by strategies of kinds whose deletion waits on more than
// metadata.finalizers, and that change an object as its deletion begins (a namespace turns
// Terminating and waits for its content to go).
type DeletionHolder interface {
	// PrepareForDelete adjusts an object that is about to get its deletionTimestamp.
	PrepareForDelete(obj *unstructured.Unstructured)
	// HoldsDeletion reports whether the object must stay after its deletionTimestamp is set.
	HoldsDeletion(obj *unstructured.Unstructured) bool
}

// afterDelete tells the kind's allocator that obj, as last stored, is gone.
func (c *call) afterDelete(obj *unstructured.Unstructured) {
	if a := c.kind.Allocator; a != nil && obj != nil {
		a.AfterDelete(context.WithoutCancel(c.ctx), obj)
	}
}

func toJSON(obj *unstructured.Unstructured) ([]byte, error) { return json.Marshal(obj.Object) }
