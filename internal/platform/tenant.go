package platform

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// AdminBinding is the RoleBinding that grants a tenant's admins the admin ClusterRole in
// each of its namespaces.
const AdminBinding = "kubeos-tenant-admins"

// NamespaceFor is the namespace of a tenant's environment.
func NamespaceFor(tenant, env string) string { return tenant + "-" + env }

type tenantDriver struct{ c client.Client }

func (d *tenantDriver) Observe(ctx context.Context, t *v1alpha1.Tenant) (lifecycle.Outcome, error) {
	t.Status.Namespaces = nil
	for _, env := range t.Spec.Environments {
		t.Status.Namespaces = append(t.Status.Namespaces, NamespaceFor(t.Name, env))
	}
	extra, err := d.extraNamespaces(ctx, t)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	exists, upToDate := false, len(extra) == 0
	for _, env := range t.Spec.Environments {
		var ns corev1.Namespace
		err := d.c.Get(ctx, client.ObjectKey{Name: NamespaceFor(t.Name, env)}, &ns)
		if apierrors.IsNotFound(err) {
			upToDate = false
			continue
		}
		if err != nil {
			return lifecycle.Outcome{}, err
		}
		if owner := ns.Labels[v1alpha1.LabelTenant]; owner != t.Name {
			return lifecycle.Outcome{Terminal: fmt.Errorf("namespace %s exists and does not belong to tenant %s", ns.Name, t.Name), Reason: "NamespaceConflict"}, nil
		}
		exists = true
		var rb rbacv1.RoleBinding
		err = d.c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: AdminBinding}, &rb)
		if err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, err
		}
		if err != nil || !equality.Semantic.DeepEqual(rb.Subjects, subjectsOf(t)) || ns.Status.Phase == corev1.NamespaceTerminating {
			upToDate = false
		}
	}
	return lifecycle.Outcome{Exists: exists, UpToDate: upToDate}, nil
}

func (d *tenantDriver) extraNamespaces(ctx context.Context, t *v1alpha1.Tenant) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := d.c.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelTenant: t.Name}); err != nil {
		return nil, err
	}
	var out []corev1.Namespace
	for _, ns := range list.Items {
		if !slices.Contains(t.Spec.Environments, ns.Labels[v1alpha1.LabelEnv]) && ns.DeletionTimestamp == nil {
			out = append(out, ns)
		}
	}
	return out, nil
}

func subjectsOf(t *v1alpha1.Tenant) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, a := range t.Spec.Admins {
		out = append(out, rbacv1.Subject{Kind: a.Kind, APIGroup: rbacv1.GroupName, Name: a.Name})
	}
	return out
}

func (d *tenantDriver) Provision(ctx context.Context, t *v1alpha1.Tenant) (lifecycle.Outcome, error) {
	return d.ensure(ctx, t, "NamespacesCreated")
}

func (d *tenantDriver) Update(ctx context.Context, t *v1alpha1.Tenant) (lifecycle.Outcome, error) {
	return d.ensure(ctx, t, "NamespacesUpdated")
}

// ensure creates each environment's namespace and admin binding, and deletes namespaces of
// environments no longer listed.
func (d *tenantDriver) ensure(ctx context.Context, t *v1alpha1.Tenant, reason string) (lifecycle.Outcome, error) {
	for _, env := range t.Spec.Environments {
		name := NamespaceFor(t.Name, env)
		var ns corev1.Namespace
		err := d.c.Get(ctx, client.ObjectKey{Name: name}, &ns)
		switch {
		case apierrors.IsNotFound(err):
			ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{v1alpha1.LabelTenant: t.Name, v1alpha1.LabelEnv: env}}}
			if err := d.c.Create(ctx, &ns); err != nil {
				return lifecycle.Outcome{}, err
			}
		case err != nil:
			return lifecycle.Outcome{}, err
		case ns.Status.Phase == corev1.NamespaceTerminating:
			return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Requeue: true, Reason: "NamespaceTerminating",
				Message: "namespace " + name + " is still being deleted"}, nil
		case ns.Labels[v1alpha1.LabelEnv] != env:
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[v1alpha1.LabelTenant], ns.Labels[v1alpha1.LabelEnv] = t.Name, env
			if err := d.c.Update(ctx, &ns); err != nil {
				return lifecycle.Outcome{}, err
			}
		}
		rb := rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: AdminBinding,
			Labels: map[string]string{v1alpha1.LabelTenant: t.Name}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: subjectsOf(t)}
		var cur rbacv1.RoleBinding
		err = d.c.Get(ctx, client.ObjectKeyFromObject(&rb), &cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := d.c.Create(ctx, &rb); err != nil {
				return lifecycle.Outcome{}, err
			}
		case err != nil:
			return lifecycle.Outcome{}, err
		case !equality.Semantic.DeepEqual(cur.Subjects, rb.Subjects):
			cur.Subjects = rb.Subjects
			if err := d.c.Update(ctx, &cur); err != nil {
				return lifecycle.Outcome{}, err
			}
		}
	}
	extra, err := d.extraNamespaces(ctx, t)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	for i := range extra {
		if err := d.c.Delete(ctx, &extra[i]); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, err
		}
	}
	return lifecycle.Outcome{Reason: reason, Message: fmt.Sprintf("%d namespaces", len(t.Spec.Environments))}, nil
}

// Deprovision removes the admin bindings, then the namespaces (last environment first), and
// waits until the namespaces are gone.
func (d *tenantDriver) Deprovision(ctx context.Context, t *v1alpha1.Tenant) (lifecycle.Outcome, error) {
	var list corev1.NamespaceList
	if err := d.c.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelTenant: t.Name}); err != nil {
		return lifecycle.Outcome{}, err
	}
	if len(list.Items) == 0 {
		return lifecycle.Outcome{Reason: "NamespacesDeleted"}, nil
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name > list.Items[j].Name })
	for _, ns := range list.Items {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: AdminBinding}}
		if err := d.c.Delete(ctx, rb); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, err
		}
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp != nil {
			continue
		}
		if err := d.c.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, err
		}
	}
	return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Requeue: true, Reason: "DeletingNamespaces",
		Message: fmt.Sprintf("waiting for %d namespaces to be deleted", len(list.Items))}, nil
}
