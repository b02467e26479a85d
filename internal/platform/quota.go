package platform

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// quotaDriver measures usage into status; enforcement is in Admission.
type quotaDriver struct {
	c       client.Client
	counter Counter
}

// tenantNamespaces lists the namespaces labelled for tenant.
func tenantNamespaces(ctx context.Context, r client.Reader, tenant string) ([]string, error) {
	var list corev1.NamespaceList
	if err := r.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelTenant: tenant}); err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	slices.Sort(out)
	return out, nil
}

func (d *quotaDriver) Observe(ctx context.Context, q *v1alpha1.Quota) (lifecycle.Outcome, error) {
	if d.counter == nil {
		return lifecycle.Outcome{Exists: true, UpToDate: true}, nil
	}
	nss, err := tenantNamespaces(ctx, d.c, q.Spec.Tenant)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	var usage []v1alpha1.QuotaUsage
	for _, l := range q.Spec.Limits {
		in := nss
		if l.Namespace != "" {
			in = []string{l.Namespace}
		}
		n, err := d.counter.Count(ctx, l.Resource, in)
		if err != nil {
			return lifecycle.Outcome{}, err
		}
		usage = append(usage, v1alpha1.QuotaUsage{Resource: l.Resource, Namespace: l.Namespace, Used: n, Max: l.Max})
	}
	if !equality.Semantic.DeepEqual(usage, q.Status.Usage) {
		q.Status.Usage = usage
	}
	return lifecycle.Outcome{Exists: true, UpToDate: true, RequeueAfter: 5 * time.Second}, nil
}

func (d *quotaDriver) Provision(context.Context, *v1alpha1.Quota) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}
func (d *quotaDriver) Update(context.Context, *v1alpha1.Quota) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}
func (d *quotaDriver) Deprovision(context.Context, *v1alpha1.Quota) (lifecycle.Outcome, error) {
	return lifecycle.Outcome{}, nil
}
