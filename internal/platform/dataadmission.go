package platform

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// kindValidators validate creates and updates of one kubeos.dev kind (old is nil on create);
// errors are answered with 422. Each kind's file adds its own in an init(). A validator
// finds the admission reader and the object's tenant with AdmissionContext(ctx).
var kindValidators = map[string]func(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList{}

// serverKinds maps a data kind to the server kind its spec.server names; optional kinds
// (Alert) need no entry when spec.server is empty.
var serverKinds = map[string]struct {
	kind     string
	optional bool
}{
	"Database": {kind: servers.PostgreSQL},
	"Cache":    {kind: servers.Redis},
	"Topic":    {kind: servers.NATS},
	"Bucket":   {kind: servers.S3},
	"Alert":    {kind: servers.Prometheus, optional: true},
}

// AdmissionInfo is what a kind validator may need beside the object.
type AdmissionInfo struct {
	// Reader is the admission's informer cache (nil until synced).
	Reader client.Reader
	// Namespace of the object and its Tenant (empty: not a tenant's namespace).
	Namespace, Tenant string
	// Operation is Create or Update.
	Operation admission.Operation
}

type admissionKey struct{}

// AdmissionContext returns what the admission plugin knows of the request being validated.
func AdmissionContext(ctx context.Context) AdmissionInfo {
	i, _ := ctx.Value(admissionKey{}).(AdmissionInfo)
	return i
}

// TenantOf is the tenant of namespace (its kubeos.dev/tenant label), "" when none.
func TenantOf(ctx context.Context, r client.Reader, namespace string) (string, error) {
	if r == nil || namespace == "" {
		return "", nil
	}
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return ns.Labels[v1alpha1.LabelTenant], nil
}

// checkKind runs the checks every kubeos.dev kind shares (dependsOn, spec.server) and then
// the kind's own validator.
func (a *Admission) checkKind(ctx context.Context, r client.Reader, at *admission.Attributes) error {
	gk := at.Kind.GroupKind()
	tenant, err := TenantOf(ctx, r, at.Namespace)
	if err != nil {
		return err
	}
	info := AdmissionInfo{Reader: r, Namespace: at.Namespace, Tenant: tenant, Operation: at.Operation}
	ctx = context.WithValue(ctx, admissionKey{}, info)
	spec, _ := at.Object.Object["spec"].(map[string]any)
	errs := a.checkDependsOn(ctx, info, spec)
	if sk, ok := serverKinds[at.Kind.Kind]; ok && r != nil && len(errs) == 0 {
		name, _ := spec["server"].(string)
		if name != "" || !sk.optional {
			if _, err := servers.Resolve(ctx, r, sk.kind, name, tenant); err != nil {
				switch {
				case servers.IsNotAllowed(err):
					return apierrors.NewForbidden(at.Resource.GroupResource(), at.Name, err)
				case servers.IsNotFound(err) && name != "":
					errs = append(errs, field.NotFound(field.NewPath("spec", "server"), name))
				case servers.IsNotFound(err):
					// No default yet: the object waits (Reconciling) until one is registered.
				default:
					return err
				}
			}
		}
	}
	if v := kindValidators[at.Kind.Kind]; v != nil && len(errs) == 0 {
		errs = append(errs, v(ctx, at.Object, at.OldObject)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gk, at.Name, errs)
	}
	return nil
}

// checkDependsOn refuses dependsOn entries of unknown kinds, a namespaced kind named from a
// cluster-scoped object without a namespace, and a namespace of another tenant.
func (a *Admission) checkDependsOn(ctx context.Context, info AdmissionInfo, spec map[string]any) field.ErrorList {
	deps, _ := spec["dependsOn"].([]any)
	var errs field.ErrorList
	for i, d := range deps {
		m, _ := d.(map[string]any)
		p := field.NewPath("spec", "dependsOn").Index(i)
		kind, _ := m["kind"].(string)
		ns, _ := m["namespace"].(string)
		if !slices.Contains(Kinds, kind) {
			errs = append(errs, field.NotSupported(p.Child("kind"), kind, Kinds))
			continue
		}
		if slices.Contains(ClusterScoped, kind) {
			continue
		}
		if ns == "" && info.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), fmt.Sprintf("%s is namespaced and this object is not", kind)))
			continue
		}
		if ns != "" && ns != info.Namespace && info.Reader != nil {
			other, err := TenantOf(ctx, info.Reader, ns)
			if err != nil {
				errs = append(errs, field.InternalError(p.Child("namespace"), err))
				continue
			}
			if other != info.Tenant {
				errs = append(errs, field.Invalid(p.Child("namespace"), ns, "belongs to another tenant"))
			}
		}
	}
	return errs
}
