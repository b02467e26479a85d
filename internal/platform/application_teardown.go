package platform

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// teardownItem is one object an Application's deletion removes: a member Component, or a
// Route or Release of one.
type teardownItem struct {
	// key is Kind/name.
	key string
	obj client.Object
	// after lists the keys that must be gone before this one's deletion is issued.
	after []string
}

// teardownStep decides one pass of an Application's deletion over the items that still
// exist: the indexes whose deletion to issue now (not being deleted yet, and nothing they
// wait for is left) and, for the others not being deleted, what they still wait for.
func teardownStep(items []teardownItem) (now []int, waits map[string][]string) {
	present := map[string]bool{}
	for _, it := range items {
		present[it.key] = true
	}
	waits = map[string][]string{}
	for i, it := range items {
		if it.obj.GetDeletionTimestamp() != nil {
			continue
		}
		var left []string
		for _, a := range it.after {
			if present[a] {
				left = append(left, a)
			}
		}
		if len(left) == 0 {
			now = append(now, i)
			continue
		}
		sort.Strings(left)
		waits[it.key] = slices.Compact(left)
	}
	return now, waits
}

// teardownItems lists what deleting an Application removes, with the order between them:
// a Component goes after its Routes and Releases and after the members that depend on it
// (spec.dependsOn of kind Component); Routes and Releases go first.
func teardownItems(comps []*v1alpha1.Component, routes []v1alpha1.Route, releases []v1alpha1.Release) []teardownItem {
	names := map[string]bool{}
	for _, c := range comps {
		names[c.Name] = true
	}
	var items []teardownItem
	before := map[string][]string{} // component → keys to go first
	for i := range routes {
		r := &routes[i]
		hit := false
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.Backends {
				if names[b.Component] {
					hit = true
					before[b.Component] = append(before[b.Component], "Route/"+r.Name)
				}
			}
		}
		if hit {
			items = append(items, teardownItem{key: "Route/" + r.Name, obj: r})
		}
	}
	for i := range releases {
		rel := &releases[i]
		if names[rel.Spec.Component] {
			items = append(items, teardownItem{key: "Release/" + rel.Name, obj: rel})
			before[rel.Spec.Component] = append(before[rel.Spec.Component], "Release/"+rel.Name)
		}
	}
	for _, c := range comps {
		for _, dep := range c.Spec.DependsOn {
			if dep.Kind == "Component" && (dep.Namespace == "" || dep.Namespace == c.Namespace) && names[dep.Name] {
				before[dep.Name] = append(before[dep.Name], "Component/"+c.Name)
			}
		}
	}
	for _, c := range comps {
		items = append(items, teardownItem{key: "Component/" + c.Name, obj: c, after: before[c.Name]})
	}
	return items
}

// Deprovision deletes the members' Routes and Releases, then the members, one wave at a
// time: a deletion is issued only once what must go before it is gone (teardownItems), and
// the Application stays (Reconciling, DeletingComponents) until every one is gone — the
// engine holds its finalizer while a member exists (lifecycle.Contains), and the members'
// finalizers do not wait for it. Data services and Volumes are never deleted; those with
// deletionPolicy Retain are named in the condition message and, once, in an Event (Kept).
// Each wave is an Event (DeletingComponents) naming what it deletes.
func (d *applicationDriver) Deprovision(ctx context.Context, app *v1alpha1.Application) (lifecycle.Outcome, error) {
	d.forget(app)
	members, err := d.members(ctx, d.o.Client, app) // what exists now: the API, not the cache
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	for _, r := range app.Status.Components {
		if !slices.ContainsFunc(members, func(m member) bool { return m.name == r.Name }) {
			members = append(members, member{name: r.Name})
		}
	}
	var comps []*v1alpha1.Component
	for _, m := range members {
		if m.comp != nil {
			comps = append(comps, m.comp)
		}
	}
	// A member recorded only in status (it stopped matching the selector since) is one of
	// the Application's Contains links the engine waits for: read it, so it goes too.
	for _, m := range members {
		if m.comp != nil {
			continue
		}
		var c v1alpha1.Component
		if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: m.name}, &c); err == nil {
			comps = append(comps, &c)
		} else if !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, fmt.Errorf("read component %s: %w", m.name, err)
		}
	}
	kept, err := d.kept(ctx, app.Namespace, comps)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	c := d.o.Client
	var routes v1alpha1.RouteList
	if err := c.List(ctx, &routes, client.InNamespace(app.Namespace)); err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("list routes: %w", err)
	}
	var releases v1alpha1.ReleaseList
	if err := c.List(ctx, &releases, client.InNamespace(app.Namespace)); err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("list releases: %w", err)
	}
	items := teardownItems(comps, routes.Items, releases.Items)
	now, waits := teardownStep(items)
	var deleted []string
	for _, i := range now {
		it := items[i]
		if err := c.Delete(ctx, it.obj); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, fmt.Errorf("delete %s: %w", it.key, err)
		}
		deleted = append(deleted, it.key)
	}
	if len(kept) > 0 && !strings.Contains(terminatingMessage(app), "deletionPolicy Retain") {
		recordEvent(d.o.Events, app, true, "Kept", "Delete", strings.Join(kept, "; "))
	}
	if len(deleted) > 0 {
		recordEvent(d.o.Events, app, true, "DeletingComponents", "Delete", "deleting "+strings.Join(deleted, ", "))
	}
	if len(items) == 0 {
		msg := "Components, Routes and Releases deleted"
		if len(kept) > 0 {
			msg += "; " + strings.Join(kept, "; ")
		}
		return lifecycle.Outcome{Reason: "Deprovisioned", Message: msg}, nil
	}
	var parts []string
	var gone []string
	for _, it := range items {
		if it.obj.GetDeletionTimestamp() != nil || slices.Contains(deleted, it.key) {
			gone = append(gone, it.key)
		}
	}
	if len(gone) > 0 {
		parts = append(parts, "deleting "+strings.Join(gone, ", "))
	}
	keys := make([]string, 0, len(waits))
	for k := range waits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+" after "+strings.Join(waits[k], ", "))
	}
	parts = append(parts, kept...)
	// Members going wake the Application (they are its Contains links); Routes and
	// Releases do not, hence the requeue.
	return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "DeletingComponents", Message: strings.Join(parts, "; "), RequeueAfter: time.Second}, nil
}

// terminatingMessage is the message of app's Terminating condition ("" without one).
func terminatingMessage(app *v1alpha1.Application) string {
	if c := meta.FindStatusCondition(app.Status.Conditions, lifecycle.ConditionTerminating); c != nil {
		return c.Message
	}
	return ""
}
