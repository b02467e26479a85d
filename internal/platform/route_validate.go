package platform

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func init() { kindValidators["Route"] = validateRoute }

// validateRoute refuses (422) what the gateway could not serve as asked:
//   - a backend port the Component does not expose (when the Component exists; a missing
//     one is a dependency the Route waits for), or no port named when it exposes several;
//   - hostnames the TLS Certificate's dnsNames do not cover (when the Certificate exists);
//   - a bad regular expression, a ReplacePrefixMatch on a rule whose matches are not all
//     PathPrefix, a rule with both a RequestRedirect and backends;
//   - a hostname outside the tenant's allowed hostnames: the Tenant's annotation
//     kubeos.dev/route-hostnames, a comma-separated list of exact names and "*.<domain>"
//     patterns (absent: no limit; present and empty: no Route hostname at all);
//   - a hostname that overlaps one of a Route of another tenant (namespaces without a
//     tenant count as one tenant of their own). Overlap is refused for the whole hostname,
//     not only the same path: Gateway API's precedence would let a longer path or an exact
//     host of one tenant take requests meant for another's. The error is a
//     FieldValueForbidden cause on spec.hostnames[i] naming the other Route's namespace.
func validateRoute(ctx context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	var r v1alpha1.Route
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	r.Namespace = obj.GetNamespace()
	errs := ValidateRouteSpec(&r.Spec)
	info := AdmissionContext(ctx)
	if info.Reader == nil || len(errs) > 0 {
		return errs
	}
	errs = append(errs, routeBackendPorts(ctx, info.Reader, &r)...)
	errs = append(errs, routeCertificate(ctx, info.Reader, &r)...)
	errs = append(errs, routeTenancy(ctx, info, &r)...)
	return errs
}

// ValidateRouteSpec checks a Route's spec alone.
func ValidateRouteSpec(s *v1alpha1.RouteSpec) field.ErrorList {
	var errs field.ErrorList
	if len(s.Hostnames) == 0 {
		errs = append(errs, field.Required(field.NewPath("spec", "hostnames"), "a Route needs a hostname"))
	}
	for i, rule := range s.Rules {
		p := field.NewPath("spec", "rules").Index(i)
		allPrefix := true
		for j, m := range rule.Matches {
			mp := p.Child("matches").Index(j)
			if m.Path == nil || m.Path.Type == "" || m.Path.Type == v1alpha1.PathPrefix {
				if m.Path != nil && !strings.HasPrefix(m.Path.Value, "/") {
					errs = append(errs, field.Invalid(mp.Child("path", "value"), m.Path.Value, "must start with /"))
				}
			} else {
				allPrefix = false
				switch m.Path.Type {
				case v1alpha1.PathExact:
					if !strings.HasPrefix(m.Path.Value, "/") {
						errs = append(errs, field.Invalid(mp.Child("path", "value"), m.Path.Value, "must start with /"))
					}
				case v1alpha1.MatchRegularExpression:
					if _, err := regexp.Compile(m.Path.Value); err != nil {
						errs = append(errs, field.Invalid(mp.Child("path", "value"), m.Path.Value, err.Error()))
					}
				default:
					errs = append(errs, field.NotSupported(mp.Child("path", "type"), m.Path.Type,
						[]string{v1alpha1.PathExact, v1alpha1.PathPrefix, v1alpha1.MatchRegularExpression}))
				}
			}
			for what, vs := range map[string][]v1alpha1.ValueMatch{"headers": m.Headers, "queryParams": m.QueryParams} {
				for k, v := range vs {
					vp := mp.Child(what).Index(k)
					switch v.Type {
					case "", v1alpha1.MatchExact:
					case v1alpha1.MatchRegularExpression:
						if _, err := regexp.Compile(v.Value); err != nil {
							errs = append(errs, field.Invalid(vp.Child("value"), v.Value, err.Error()))
						}
					default:
						errs = append(errs, field.NotSupported(vp.Child("type"), v.Type, []string{v1alpha1.MatchExact, v1alpha1.MatchRegularExpression}))
					}
				}
			}
		}
		redirect := false
		for j, f := range rule.Filters {
			fp := p.Child("filters").Index(j)
			switch f.Type {
			case v1alpha1.FilterRequestRedirect:
				redirect = true
				if f.RequestRedirect == nil {
					errs = append(errs, field.Required(fp.Child("requestRedirect"), ""))
				}
			case v1alpha1.FilterRequestHeaderModifier:
				if f.RequestHeaderModifier == nil {
					errs = append(errs, field.Required(fp.Child("requestHeaderModifier"), ""))
				}
			case v1alpha1.FilterResponseHeaderModifier:
				if f.ResponseHeaderModifier == nil {
					errs = append(errs, field.Required(fp.Child("responseHeaderModifier"), ""))
				}
			case v1alpha1.FilterURLRewrite:
				if f.URLRewrite == nil {
					errs = append(errs, field.Required(fp.Child("urlRewrite"), ""))
				} else if f.URLRewrite.ReplacePrefixMatch != nil && !allPrefix {
					errs = append(errs, field.Invalid(fp.Child("urlRewrite", "replacePrefixMatch"), *f.URLRewrite.ReplacePrefixMatch,
						"needs every match of the rule to be a PathPrefix"))
				}
			}
		}
		switch {
		case redirect && len(rule.Backends) > 0:
			errs = append(errs, field.Forbidden(p.Child("backends"), "a rule with a RequestRedirect has no backends"))
		case !redirect && len(rule.Backends) == 0:
			errs = append(errs, field.Required(p.Child("backends"), "a rule without a RequestRedirect needs a backend"))
		}
	}
	return errs
}

func routeBackendPorts(ctx context.Context, rd client.Reader, r *v1alpha1.Route) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range r.Spec.Rules {
		for j, b := range rule.Backends {
			p := field.NewPath("spec", "rules").Index(i).Child("backends").Index(j)
			var comp v1alpha1.Component
			if err := rd.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: b.Component}, &comp); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, field.InternalError(p, err))
				}
				continue
			}
			if _, err := ExposedPort(comp.Spec.Exposes, b); err != nil {
				bad := any(b.Port)
				pp := p.Child("port")
				if b.Port == 0 {
					bad, pp = b.PortName, p.Child("portName")
				}
				errs = append(errs, field.Invalid(pp, bad, "Component "+b.Component+" "+err.Error()))
			}
		}
	}
	return errs
}

func routeCertificate(ctx context.Context, rd client.Reader, r *v1alpha1.Route) field.ErrorList {
	if r.Spec.TLS == nil {
		return nil
	}
	var cert v1alpha1.Certificate
	if err := rd.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Spec.TLS.Certificate}, &cert); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // a dependency: the Route waits for it
		}
		return field.ErrorList{field.InternalError(field.NewPath("spec", "tls", "certificate"), err)}
	}
	if bad := UncoveredHostnames(r.Spec.Hostnames, cert.Spec.DNSNames); len(bad) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "hostnames"), bad,
			fmt.Sprintf("not covered by the dnsNames of Certificate %s (%s)", cert.Name, strings.Join(cert.Spec.DNSNames, ", ")))}
	}
	return nil
}

func routeTenancy(ctx context.Context, info AdmissionInfo, r *v1alpha1.Route) field.ErrorList {
	var errs field.ErrorList
	hp := field.NewPath("spec", "hostnames")
	if info.Tenant != "" {
		allowed, err := tenantHostnames(ctx, info.Reader, info.Tenant)
		if err != nil {
			return field.ErrorList{field.InternalError(hp, err)}
		}
		for i, h := range r.Spec.Hostnames {
			if allowed != nil && !HostnameAllowed(h, allowed) {
				errs = append(errs, field.Forbidden(hp.Index(i), fmt.Sprintf("%s is not among tenant %s's route hostnames (%s on the Tenant: %s)",
					h, info.Tenant, AnnotationRouteHostnames, strings.Join(allowed, ", "))))
			}
		}
	}
	var list v1alpha1.RouteList
	if err := info.Reader.List(ctx, &list); err != nil {
		return append(errs, field.InternalError(hp, err))
	}
	tenants := map[string]string{r.Namespace: info.Tenant}
	for _, o := range list.Items {
		if o.Namespace == r.Namespace {
			continue
		}
		t, ok := tenants[o.Namespace]
		if !ok {
			var err error
			if t, err = TenantOf(ctx, info.Reader, o.Namespace); err != nil {
				return append(errs, field.InternalError(hp, err))
			}
			tenants[o.Namespace] = t
		}
		if t == info.Tenant {
			continue
		}
		for i, h := range r.Spec.Hostnames {
			for _, oh := range o.Spec.Hostnames {
				if HostnamesOverlap(h, oh) {
					errs = append(errs, field.Forbidden(hp.Index(i), fmt.Sprintf("%s is claimed by Route %s/%s of another tenant (%s)", h, o.Namespace, o.Name, oh)))
				}
			}
		}
	}
	return errs
}
