package crd

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"

	compiler "kubeos.dev/kube/internal/crd"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

func isTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	return apihelpers.IsCRDConditionTrue(crd, t)
}

// cleanupRetry is how soon a deleted CRD whose custom resources are held by finalizers is
// looked at again.
const cleanupRetry = time.Second

// reconcile brings one CRD's registration and status up to date; a positive duration asks
// to be called again after it.
func (c *Controller) reconcile(ctx context.Context, name string) (time.Duration, error) {
	crd, ok := c.get(name)
	if !ok {
		c.locked(func() {
			delete(c.finalized, name)
			c.unregister(name, true)
			delete(c.structural, name)
			delete(c.accepted, name)
		})
		return 0, nil
	}
	if crd.DeletionTimestamp != nil {
		return c.finalize(ctx, crd)
	}
	c.mu.Lock()
	d := c.decide(crd)
	if d.served() {
		c.register(crd, d.accepted, false)
	} else {
		c.unregister(name, false)
	}
	c.mu.Unlock()
	if !c.leading() {
		return 0, nil
	}
	// A status write takes only the status from the body (the server keeps the stored spec
	// and metadata), so the stripped copy is a valid body.
	next := crd.DeepCopy()
	next.Status.AcceptedNames = d.accepted
	apihelpers.SetCRDCondition(next, d.namesAccepted)
	apihelpers.SetCRDCondition(next, d.established)
	// A non-structural schema is reported, not refused: the CRD stays established and
	// served, as upstream does.
	if cond := c.nonStructural(crd); cond != nil {
		apihelpers.SetCRDCondition(next, *cond)
	} else if apihelpers.FindCRDCondition(next, apiextensionsv1.NonStructuralSchema) != nil {
		apihelpers.RemoveCRDCondition(next, apiextensionsv1.NonStructuralSchema)
	}
	if !reflect.DeepEqual(next.Status, crd.Status) {
		if _, err := c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return 0, fmt.Errorf("update status: %w", err)
		}
	}
	if d.served() {
		if err := c.migrate(ctx, crd.CustomResourceDefinition); err != nil {
			return 0, fmt.Errorf("storage version migration: %w", err)
		}
	}
	return 0, nil
}

// locked runs f with c.mu held.
func (c *Controller) locked(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// decide makes decideNames' decision for crd against the built-in resources of its group
// and the names the group's other CRDs hold, and records the accepted names as crd's.
// Called with c.mu held.
func (c *Controller) decide(crd *compiler.Stripped) nameDecision {
	taken := newTakenNames()
	for gr, k := range c.builtins {
		if gr.Group == crd.Spec.Group {
			taken.add(apiextensionsv1.CustomResourceDefinitionNames{Plural: k.Resource, Singular: k.Singular, ShortNames: k.ShortNames, Kind: k.Kind, ListKind: k.ListKind})
		}
	}
	for _, o := range c.groupCRDs(crd.Spec.Group) {
		if o.Name != crd.Name {
			taken.add(c.acceptedNames(o))
		}
	}
	d := decideNames(crd.CustomResourceDefinition, taken)
	c.accepted[crd.Name] = acceptedNames{resourceVersion: crd.ResourceVersion, names: d.accepted}
	return d
}

// acceptedNames are the names crd holds: those decided a moment ago for the version the
// informer shows (the status written with them may not be there yet), else its
// status.acceptedNames. Called with c.mu held.
func (c *Controller) acceptedNames(crd *compiler.Stripped) apiextensionsv1.CustomResourceDefinitionNames {
	if a, ok := c.accepted[crd.Name]; ok && a.resourceVersion == crd.ResourceVersion {
		return a.names
	}
	return crd.Status.AcceptedNames
}

// register puts crd's Kinds, served under names (its accepted names), into the registry
// unless they are there already. Called with c.mu held.
func (c *Controller) register(crd *compiler.Stripped, names apiextensionsv1.CustomResourceDefinitionNames, terminating bool) {
	if s, ok := c.served[crd.Name]; ok && s.uid == string(crd.UID) && s.generation == crd.Generation && s.terminating == terminating &&
		equality.Semantic.DeepEqual(s.names, names) {
		return
	}
	// The informer's object is never changed (updates replace it): the Kinds can keep it.
	kinds := compiler.Compile(crd, names, c.o.Compile, terminating)
	now := map[schema.GroupVersionResource]bool{}
	s := &servedCRD{uid: string(crd.UID), generation: crd.Generation, terminating: terminating, names: names}
	for _, k := range kinds {
		c.o.Registry.Add(k)
		now[k.GVR()] = true
		s.gvrs = append(s.gvrs, k.GVR())
	}
	if old, ok := c.served[crd.Name]; ok {
		for _, gvr := range old.gvrs {
			if !now[gvr] {
				c.o.Registry.Remove(gvr)
			}
		}
		if old.names.Plural != names.Plural && c.o.Caches != nil {
			c.o.Caches.Stop(storage.ResourcePrefix(crd.Spec.Group, old.names.Plural))
		}
	}
	c.served[crd.Name] = s
}

// unregister removes the Kinds of a CRD; stopCache also stops its watch cache (the CRD is
// gone). Called with c.mu held.
func (c *Controller) unregister(name string, stopCache bool) {
	s, ok := c.served[name]
	if !ok {
		return
	}
	delete(c.served, name)
	c.removeKinds(s, stopCache)
}

// removeKinds drops the Kinds registered for s and, with stopCache, its watch cache.
func (c *Controller) removeKinds(s *servedCRD, stopCache bool) {
	for _, gvr := range s.gvrs {
		if k, ok := c.o.Registry.Lookup(gvr); ok && c.builtins[gvr.GroupResource()] != k {
			c.o.Registry.Remove(gvr)
		}
	}
	if stopCache && c.o.Caches != nil && len(s.gvrs) > 0 {
		c.o.Caches.Stop(storage.ResourcePrefix(s.gvrs[0].Group, s.gvrs[0].Resource))
	}
}

// finalize deletes the custom resources of a deleted CRD, then drops its Kinds and removes
// the cleanup finalizer so that the CRD goes.
func (c *Controller) finalize(ctx context.Context, crd *compiler.Stripped) (time.Duration, error) {
	done := false
	c.locked(func() { done = c.finalized[crd.Name] == crd.UID })
	if done || !apihelpers.CRDHasFinalizer(crd.CustomResourceDefinition, registry.CRDCleanupFinalizer) {
		c.locked(func() { c.unregister(crd.Name, true) })
		return 0, nil
	}
	// A CRD that was established is served as terminating (under its accepted names) until
	// its custom resources are gone.
	var d nameDecision
	c.locked(func() {
		if d = c.decide(crd); d.served() {
			c.register(crd, d.accepted, true)
		}
	})
	remaining := 0
	if !c.leading() {
		return 0, nil // the leader deletes the resources
	}
	if d.served() {
		var err error
		if remaining, err = c.deleteInstances(ctx, crd.CustomResourceDefinition); err != nil {
			return 0, err
		}
	}
	next := crd.DeepCopy()
	msg := "CustomResource deletion is in progress"
	if remaining > 0 {
		msg = fmt.Sprintf("CustomResource deletion is in progress: %d remaining (waiting for their finalizers)", remaining)
	}
	apihelpers.SetCRDCondition(next, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionInProgress", Message: msg})
	if !reflect.DeepEqual(next.Status, crd.Status) {
		if _, err := c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return 0, fmt.Errorf("update status: %w", err)
		}
	}
	if remaining > 0 {
		return cleanupRetry, nil
	}
	c.locked(func() { c.unregister(crd.Name, true) })
	if err := c.removeFinalizer(ctx, crd.CustomResourceDefinition); err != nil {
		return 0, fmt.Errorf("remove finalizer: %w", err)
	}
	c.locked(func() { c.finalized[crd.Name] = crd.UID })
	return 0, nil
}

// removeFinalizer removes the cleanup finalizer from the stored CRD. The informer's copy is
// stripped, so the update is made to the object read from the server.
func (c *Controller) removeFinalizer(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := c.client.ApiextensionsV1().CustomResourceDefinitions()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != crd.UID || !apihelpers.CRDHasFinalizer(cur, registry.CRDCleanupFinalizer) {
			return nil // another CRD of the same name, or done already
		}
		apihelpers.CRDRemoveFinalizer(cur, registry.CRDCleanupFinalizer)
		_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// servedGVR is a served version's resource (the storage version if it is served).
func servedGVR(crd *apiextensionsv1.CustomResourceDefinition) (schema.GroupVersionResource, bool) {
	storageVersion := compiler.StorageVersion(crd)
	var found *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Served && (found == nil || v.Name == storageVersion) {
			found = v
		}
	}
	if found == nil {
		return schema.GroupVersionResource{}, false
	}
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: found.Name, Resource: crd.Spec.Names.Plural}, true
}

// deleteInstances deletes every custom resource of crd and returns how many remain.
func (c *Controller) deleteInstances(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (int, error) {
	gvr, ok := servedGVR(crd)
	if !ok {
		return 0, nil
	}
	client := c.dynamic.Resource(gvr)
	if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("delete %s: %w", gvr.Resource, err)
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	return len(list.Items), nil
}

// migrate rewrites every object of crd in the storage version when status.storedVersions
// names another version, then trims storedVersions to the storage version.
func (c *Controller) migrate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	storageVersion := compiler.StorageVersion(crd)
	if len(crd.Status.StoredVersions) == 1 && crd.Status.StoredVersions[0] == storageVersion {
		return nil
	}
	gvr, ok := servedGVR(crd)
	if !ok {
		return nil
	}
	client := c.dynamic.Resource(gvr)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	for i := range list.Items {
		it := &list.Items[i]
		// Written back unchanged through the API: the server stores it in the storage
		// version. The resourceVersion precondition keeps a concurrent change.
		_, err := client.Namespace(it.GetNamespace()).Update(ctx, it, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("rewrite %s %s/%s: %w", gvr.Resource, it.GetNamespace(), it.GetName(), err)
		}
		// A conflict means someone wrote it since the list: stored in the storage version.
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if compiler.StorageVersion(cur) != storageVersion || cur.UID != crd.UID {
			return nil // changed meanwhile; the next reconcile migrates again
		}
		cur.Status.StoredVersions = []string{storageVersion}
		_, err = c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// structuralCheck is the NonStructuralSchema condition computed for one generation of a
// CRD (nil: the schemas are structural).
type structuralCheck struct {
	uid        types.UID
	generation int64
	cond       *apiextensionsv1.CustomResourceDefinitionCondition
}

// nonStructural is crd's NonStructuralSchema condition, computed once per generation.
func (c *Controller) nonStructural(crd *compiler.Stripped) *apiextensionsv1.CustomResourceDefinitionCondition {
	c.mu.Lock()
	done, ok := c.structural[crd.Name]
	c.mu.Unlock()
	if ok && done.uid == crd.UID && done.generation == crd.Generation {
		return done.cond
	}
	done = structuralCheck{uid: crd.UID, generation: crd.Generation, cond: nonStructuralCondition(crd)}
	c.locked(func() { c.structural[crd.Name] = done })
	return done.cond
}

// nonStructuralCondition is the NonStructuralSchema condition upstream's
// nonstructuralschema controller computes: True with reason Violations and the violations
// as message when spec.preserveUnknownFields is set or a version's schema is not structural;
// Unknown with reason StructuralError when a schema cannot be checked; nil when every
// schema is structural. Only stored CRDs can be non-structural (v1 validation refuses them
// on create, and on update unless the stored one already was).
func nonStructuralCondition(crd *compiler.Stripped) *apiextensionsv1.CustomResourceDefinitionCondition {
	var errs field.ErrorList
	if crd.Spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(field.NewPath("spec", "preserveUnknownFields"), true, "must be false"))
	}
	unknown := func(version string, err error) *apiextensionsv1.CustomResourceDefinitionCondition {
		return &apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionUnknown, Reason: "StructuralError",
			Message: fmt.Sprintf("failed to check validation schema for version %s: %v", version, err)}
	}
	for i, v := range crd.Spec.Versions {
		validation, err := crd.Schema(v.Name)
		if err != nil {
			return unknown(v.Name, err)
		}
		if validation == nil || validation.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
			return unknown(v.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return unknown(v.Name, err)
		}
		errs = append(errs, structuralschema.ValidateStructural(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), s)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return &apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionTrue, Reason: "Violations",
		Message: errs.ToAggregate().Error()}
}
