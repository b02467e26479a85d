package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// process is one work item: the object uid is looked at as an owner in deletion (Orphan,
// Foreground) or as a dependent whose owners may be gone.
func (gc *GarbageCollector) process(ctx context.Context, uid types.UID) error {
	n := gc.graph.get(uid)
	switch {
	case n == nil:
		return nil
	case n.orphaning():
		return gc.orphanDependents(ctx, n)
	case n.deletingDependents():
		return gc.deleteDependents(ctx, n)
	case n.deleting, len(n.owners) == 0:
		return nil
	}
	return gc.attemptToDelete(ctx, n)
}

// attemptToDelete deletes a dependent that has no owner left, or strips its dangling
// references when another owner remains.
func (gc *GarbageCollector) attemptToDelete(ctx context.Context, n *node) error {
	states := make([]ownerState, len(n.owners))
	for i, ref := range n.owners {
		s, err := gc.resolveOwner(ctx, n, ref)
		if err != nil {
			return err
		}
		if s == ownerInvalid {
			gc.events.Eventf(reference(n), nil, corev1.EventTypeWarning, "OwnerRefInvalidNamespace", "GarbageCollect",
				"ownerRef [%s/%s, namespace: %s, name: %s, uid: %s] is namespaced, but this object is cluster-scoped; not collected",
				ref.APIVersion, ref.Kind, n.namespace, ref.Name, ref.UID)
			return nil
		}
		states[i] = s
	}
	v := decide(n.owners, states, gc.graph.hasDependents(n.uid), n)
	if len(v.strip) > 0 {
		gc.log.Info("removing dangling ownerReferences", "object", describe(n), "owners", v.strip)
		return gc.patchMetadata(ctx, n, func(m metaState) (map[string]any, bool) {
			refs := slices.DeleteFunc(slices.Clone(m.owners), func(r metav1.OwnerReference) bool { return slices.Contains(v.strip, r.UID) })
			return map[string]any{"ownerReferences": nilIfEmpty(refs)}, len(refs) != len(m.owners)
		})
	}
	if !v.delete {
		return nil
	}
	pre := metav1.Preconditions{UID: &n.uid, ResourceVersion: &n.rv}
	if len(v.unblock) > 0 {
		if err := gc.patchMetadata(ctx, n, func(m metaState) (map[string]any, bool) {
			refs, changed := slices.Clone(m.owners), false
			for i := range refs {
				if slices.Contains(v.unblock, refs[i].UID) && refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
					f := false
					refs[i].BlockOwnerDeletion, changed = &f, true
				}
			}
			return map[string]any{"ownerReferences": refs}, changed
		}); err != nil {
			return err
		}
		pre.ResourceVersion = nil // we just changed it
	}
	policy := v.policy
	err := gc.metadata.Resource(n.gvr).Namespace(n.namespace).Delete(ctx, n.name, metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &pre})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", describe(n), err)
	}
	gc.log.Debug("deleted dependent", "object", describe(n), "policy", policy)
	for i, ref := range n.owners {
		if states[i] != ownerSolid {
			// One Event per owner: the broadcaster folds the rest into its series count.
			gc.events.Eventf(ownerReference(n, ref), nil, corev1.EventTypeNormal, "DependentsDeleted", "GarbageCollect",
				"deleted dependents of %s %s (propagation policy %s)", ref.Kind, ref.Name, policyOf(states[i]))
			break
		}
	}
	return nil
}

func policyOf(s ownerState) metav1.DeletionPropagation {
	if s == ownerWaiting {
		return metav1.DeletePropagationForeground
	}
	return metav1.DeletePropagationBackground
}

// resolveOwner finds out what a dependent's reference points at. A live GET decides
// whenever the graph does not hold the owner: deletions never follow from the cache alone.
func (gc *GarbageCollector) resolveOwner(ctx context.Context, dep *node, ref metav1.OwnerReference) (ownerState, error) {
	if gc.isAbsent(ref.UID, "") || (dep.namespace != "" && gc.isAbsent(ref.UID, dep.namespace)) {
		return ownerDangling, nil
	}
	known := gc.graph.get(ref.UID)
	if known != nil && known.name == ref.Name && (known.namespace == "" || known.namespace == dep.namespace) {
		if known.deletingDependents() {
			return ownerWaiting, nil
		}
		return ownerSolid, nil
	}
	m, err := gc.mappingFor(ref)
	if err != nil {
		return 0, err
	}
	if dep.namespace == "" && m.namespaced {
		return ownerInvalid, nil
	}
	ns := ""
	if m.namespaced {
		ns = dep.namespace
	}
	owner, err := gc.metadata.Resource(m.gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		gc.markAbsent(ref.UID, ns)
		if known != nil && known.namespace != ns && m.namespaced {
			gc.events.Eventf(reference(dep), nil, corev1.EventTypeWarning, "OwnerRefInvalidNamespace", "GarbageCollect",
				"ownerRef [%s/%s, namespace: %s, name: %s, uid: %s] does not exist in namespace %q",
				ref.APIVersion, ref.Kind, dep.namespace, ref.Name, ref.UID, dep.namespace)
		}
		return ownerDangling, nil
	case err != nil:
		return 0, fmt.Errorf("get owner %s %s: %w", ref.Kind, ref.Name, err)
	case owner.UID != ref.UID:
		gc.markAbsent(ref.UID, ns)
		return ownerDangling, nil
	case owner.DeletionTimestamp != nil && slices.Contains(owner.Finalizers, finalizerForeground):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

func (gc *GarbageCollector) isAbsent(uid types.UID, ns string) bool {
	_, ok := gc.absent.Get(string(uid) + "/" + ns)
	return ok
}

func (gc *GarbageCollector) markAbsent(uid types.UID, ns string) {
	gc.absent.Add(string(uid)+"/"+ns, struct{}{})
}

// orphanDependents strips owner's reference from all its dependents, then removes the
// orphan finalizer so the owner goes.
func (gc *GarbageCollector) orphanDependents(ctx context.Context, owner *node) error {
	deps := gc.graph.dependentsOf(owner.uid)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, d := range deps {
		g.Go(func() error {
			return gc.patchMetadata(gctx, d, func(m metaState) (map[string]any, bool) {
				refs := slices.DeleteFunc(slices.Clone(m.owners), func(r metav1.OwnerReference) bool { return r.UID == owner.uid })
				return map[string]any{"ownerReferences": nilIfEmpty(refs)}, len(refs) != len(m.owners)
			})
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("orphan dependents of %s: %w", describe(owner), err)
	}
	if len(deps) > 0 {
		gc.events.Eventf(reference(owner), nil, corev1.EventTypeNormal, "OrphanedDependents", "GarbageCollect",
			"removed the ownerReference to this object from %d dependents", len(deps))
	}
	gc.log.Info("orphaned dependents", "owner", describe(owner), "dependents", len(deps))
	return gc.removeFinalizer(ctx, owner, finalizerOrphan)
}

// deleteDependents drives a Foreground deletion: it queues the owner's dependents for
// deletion and removes the foregroundDeletion finalizer once no dependent blocks it.
func (gc *GarbageCollector) deleteDependents(ctx context.Context, owner *node) error {
	deps := gc.graph.dependentsOf(owner.uid)
	if len(blockingDependents(owner.uid, deps)) == 0 {
		gc.log.Info("dependents deleted", "owner", describe(owner))
		return gc.removeFinalizer(ctx, owner, finalizerForeground)
	}
	for _, d := range deps {
		if !d.deleting {
			gc.queue.Add(d.uid)
		}
	}
	// Queued again when a dependent goes or stops blocking.
	return nil
}

func (gc *GarbageCollector) removeFinalizer(ctx context.Context, n *node, finalizer string) error {
	return gc.patchMetadata(ctx, n, func(m metaState) (map[string]any, bool) {
		fins := slices.DeleteFunc(slices.Clone(m.finalizers), func(f string) bool { return f == finalizer })
		return map[string]any{"finalizers": nilIfEmpty(fins)}, len(fins) != len(m.finalizers)
	})
}

// metaState is the part of an object's metadata that the collector edits.
type metaState struct {
	rv         string
	owners     []metav1.OwnerReference
	finalizers []string
}

// patchMetadata applies a merge patch to n's metadata, built by edit from the object's
// state, with a resourceVersion precondition: first from the graph, and after a conflict
// from a live GET. edit returning false means nothing to do.
func (gc *GarbageCollector) patchMetadata(ctx context.Context, n *node, edit func(metaState) (map[string]any, bool)) error {
	st := metaState{rv: n.rv, owners: n.owners, finalizers: n.finalizers}
	for attempt := 0; ; attempt++ {
		fields, ok := edit(st)
		if !ok {
			return nil
		}
		fields["resourceVersion"] = st.rv
		body, err := json.Marshal(map[string]any{"metadata": fields})
		if err != nil {
			return err
		}
		_, err = gc.dynamic.Resource(n.gvr).Namespace(n.namespace).Patch(ctx, n.name, types.MergePatchType, body, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 4 {
			if err != nil {
				return fmt.Errorf("patch %s: %w", describe(n), err)
			}
			return nil
		}
		live, err := gc.metadata.Resource(n.gvr).Namespace(n.namespace).Get(ctx, n.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if live.UID != n.uid {
			return nil
		}
		st = metaState{rv: live.ResourceVersion, owners: live.OwnerReferences, finalizers: live.Finalizers}
	}
}

func nilIfEmpty[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

func describe(n *node) string {
	if n.namespace == "" {
		return fmt.Sprintf("%s %s", n.kind, n.name)
	}
	return fmt.Sprintf("%s %s/%s", n.kind, n.namespace, n.name)
}

// reference is the Event's regarding object for n.
func reference(n *node) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: n.apiVersion, Kind: n.kind, Namespace: n.namespace, Name: n.name, UID: n.uid}
}

// ownerReference is the Event's regarding object for dep's owner ref, assumed in dep's
// namespace (where the collector looked for it).
func ownerReference(dep *node, ref metav1.OwnerReference) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: dep.namespace, Name: ref.Name, UID: ref.UID}
}
