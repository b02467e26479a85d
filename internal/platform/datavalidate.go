package platform

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// Admission validators of Database and Cache.

func init() {
	kindValidators["Database"] = validateDatabase
	kindValidators["Cache"] = validateCache
}

func fromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	if u == nil {
		return nil, nil
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DatabaseNameProblem says why a database name may not be claimed ("" when it may).
func DatabaseNameProblem(name string) string {
	switch {
	case slices.Contains(v1alpha1.ReservedDatabaseNames, name):
		return "is reserved by PostgreSQL"
	case strings.HasPrefix(name, "pg_"):
		return "begins with pg_, reserved by PostgreSQL"
	case name == "admin" || name == "public":
		return "is reserved"
	}
	return ""
}

func validateDatabase(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	spec := field.NewPath("spec")
	db, err := fromUnstructured[v1alpha1.Database](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(spec, "", err.Error())}
	}
	var errs field.ErrorList
	info := AdmissionContext(ctx)
	db.Namespace = info.Namespace
	if p := DatabaseNameProblem(DatabaseName(db)); p != "" {
		errs = append(errs, field.Invalid(spec.Child("databaseName"), DatabaseName(db), p))
	}
	if o, err := fromUnstructured[v1alpha1.Database](old); err == nil && o != nil && o.Spec.DatabaseName != db.Spec.DatabaseName {
		errs = append(errs, field.Invalid(spec.Child("databaseName"), db.Spec.DatabaseName, "is immutable"))
	}
	if db.Spec.Mode == v1alpha1.DatabaseDedicated {
		errs = append(errs, field.NotSupported(spec.Child("mode"), db.Spec.Mode, []string{v1alpha1.DatabaseShared + " (Dedicated is not offered yet)"}))
	}
	for i, g := range db.Spec.Grants {
		p := spec.Child("grants").Index(i)
		if g.Database == db.Name && (g.Namespace == "" || g.Namespace == db.Namespace) {
			errs = append(errs, field.Invalid(p.Child("database"), g.Database, "a Database cannot grant to itself"))
		}
		if g.Namespace != "" && g.Namespace != info.Namespace && info.Reader != nil {
			other, err := TenantOf(ctx, info.Reader, g.Namespace)
			if err != nil {
				errs = append(errs, field.InternalError(p.Child("namespace"), err))
			} else if other == "" || other != info.Tenant {
				errs = append(errs, field.Forbidden(p.Child("namespace"), fmt.Sprintf("namespace %s belongs to another tenant: grants stay within tenant %q", g.Namespace, info.Tenant)))
			}
		}
	}
	errs = append(errs, validateRestore(ctx, info, spec.Child("restoreFrom"), db.Spec.RestoreFrom, "Database")...)
	errs = append(errs, validatePasswordFrom(ctx, info, spec.Child("passwordFrom"), db.Spec.PasswordFrom)...)
	return errs
}

// validateRestore refuses a restore from a Backup of another kind.
func validateRestore(ctx context.Context, info AdmissionInfo, p *field.Path, r *v1alpha1.RestoreFrom, kind string) field.ErrorList {
	if r == nil || info.Reader == nil {
		return nil
	}
	var b v1alpha1.Backup
	if err := info.Reader.Get(ctx, client.ObjectKey{Namespace: info.Namespace, Name: r.Backup}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // it may come; the driver waits
		}
		return field.ErrorList{field.InternalError(p, err)}
	}
	if b.Spec.Source.Kind != kind {
		return field.ErrorList{field.Invalid(p.Child("backup"), r.Backup,
			fmt.Sprintf("Backup %s backs up a %s; a %s can only be restored from a Backup of a %s", r.Backup, b.Spec.Source.Kind, kind, kind))}
	}
	return nil
}

func validatePasswordFrom(ctx context.Context, info AdmissionInfo, p *field.Path, from *v1alpha1.PasswordFrom) field.ErrorList {
	if from == nil || info.Reader == nil {
		return nil
	}
	var cr v1alpha1.Credential
	if err := info.Reader.Get(ctx, client.ObjectKey{Namespace: info.Namespace, Name: from.Credential}, &cr); err != nil {
		return nil // absent (it may come) or unreadable: the driver decides
	}
	if cr.Spec.Type != v1alpha1.CredentialPassword {
		return field.ErrorList{field.Invalid(p.Child("credential"), from.Credential, "Credential is of type "+cr.Spec.Type+", want password")}
	}
	return nil
}

// CacheKeyPrefixProblem says why prefix may not be the key prefix of a Cache in namespace
// ("" when it may): it must be <namespace>.<something>: with no other ":" so that no two
// Caches' prefixes nest.
func CacheKeyPrefixProblem(namespace, prefix string) string {
	rest, ok := strings.CutPrefix(prefix, namespace+".")
	switch {
	case !ok:
		return fmt.Sprintf("must begin with the namespace and a dot (%s.)", namespace)
	case !strings.HasSuffix(rest, ":") || strings.Count(rest, ":") != 1 || len(rest) < 2:
		return fmt.Sprintf("must be %s.<name>: with a single colon, at the end", namespace)
	case strings.ContainsAny(rest, `*?[]\ `):
		return "must not contain glob characters or spaces"
	}
	return ""
}

func validateCache(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	spec := field.NewPath("spec")
	c, err := fromUnstructured[v1alpha1.Cache](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(spec, "", err.Error())}
	}
	info := AdmissionContext(ctx)
	c.Namespace = info.Namespace
	var errs field.ErrorList
	prefix := CacheKeyPrefix(c)
	if c.Spec.KeyPrefix != "" {
		if p := CacheKeyPrefixProblem(info.Namespace, c.Spec.KeyPrefix); p != "" {
			errs = append(errs, field.Invalid(spec.Child("keyPrefix"), c.Spec.KeyPrefix, p))
		}
	}
	if o, err := fromUnstructured[v1alpha1.Cache](old); err == nil && o != nil && o.Spec.KeyPrefix != c.Spec.KeyPrefix {
		errs = append(errs, field.Invalid(spec.Child("keyPrefix"), c.Spec.KeyPrefix, "is immutable"))
	}
	if info.Reader != nil && len(errs) == 0 {
		var list v1alpha1.CacheList
		if err := info.Reader.List(ctx, &list, client.InNamespace(info.Namespace)); err == nil {
			for _, other := range list.Items {
				if other.Name != obj.GetName() && CacheKeyPrefix(&other) == prefix {
					errs = append(errs, field.Duplicate(spec.Child("keyPrefix"), prefix))
				}
			}
		}
	}
	errs = append(errs, validateRestore(ctx, info, spec.Child("restoreFrom"), c.Spec.RestoreFrom, "Cache")...)
	errs = append(errs, validatePasswordFrom(ctx, info, spec.Child("passwordFrom"), c.Spec.PasswordFrom)...)
	return errs
}
