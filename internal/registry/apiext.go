package registry

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install" // internal types and conversions in legacyscheme
	admissionregistrationvalidation "k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
)

var categoryAPIExtensions = []string{"api-extensions"}

// crdKind is customresourcedefinitions, defaulted and validated by upstream's
// apiextensions packages (crdStrategy).
func crdKind() *Kind {
	k := kindBase(apiextensionsv1.GroupName, "v1", "customresourcedefinitions", "customresourcedefinition",
		func() *apiextensionsv1.CustomResourceDefinition { return &apiextensionsv1.CustomResourceDefinition{} },
		func() *apiextensionsv1.CustomResourceDefinitionList {
			return &apiextensionsv1.CustomResourceDefinitionList{}
		})
	k.Generation = true // metadata.generation moves on spec changes, as upstream
	k.ShortNames = []string{"crd", "crds"}
	k.Categories = categoryAPIExtensions
	k.Status = true
	k.FullColumns = true
	k.Columns = []Column{NameColumn(), createdAtColumn()}
	k.Strategy = crdStrategy{}
	return &k
}

func mutatingWebhookKind() *Kind {
	k := kindBase(admissionregistrationv1.GroupName, "v1", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration",
		func() *admissionregistrationv1.MutatingWebhookConfiguration {
			return &admissionregistrationv1.MutatingWebhookConfiguration{}
		},
		func() *admissionregistrationv1.MutatingWebhookConfigurationList {
			return &admissionregistrationv1.MutatingWebhookConfigurationList{}
		})
	k.Generation = true // metadata.generation moves on spec changes, as upstream
	k.Categories = categoryAPIExtensions
	k.Columns = []Column{webhooksColumn()}
	k.Strategy = &typedStrategy[*admissionregistrationv1.MutatingWebhookConfiguration]{
		name: nameDNSSubdomain,
		newObj: func() *admissionregistrationv1.MutatingWebhookConfiguration {
			return &admissionregistrationv1.MutatingWebhookConfiguration{}
		},
		validate: func(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
			hooks := make([]webhookView, len(c.Webhooks))
			for i, w := range c.Webhooks {
				hooks[i] = webhookView{w.Name, w.ClientConfig, w.SideEffects, w.AdmissionReviewVersions}
			}
			var in admissionregistration.MutatingWebhookConfiguration
			return append(validateWebhooks(hooks), matchConditionErrors(c, &in, func() field.ErrorList {
				return admissionregistrationvalidation.ValidateMutatingWebhookConfiguration(&in)
			})...)
		},
	}
	return &k
}

func validatingWebhookKind() *Kind {
	k := kindBase(admissionregistrationv1.GroupName, "v1", "validatingwebhookconfigurations", "validatingwebhookconfiguration",
		func() *admissionregistrationv1.ValidatingWebhookConfiguration {
			return &admissionregistrationv1.ValidatingWebhookConfiguration{}
		},
		func() *admissionregistrationv1.ValidatingWebhookConfigurationList {
			return &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		})
	k.Generation = true // metadata.generation moves on spec changes, as upstream
	k.Categories = categoryAPIExtensions
	k.Columns = []Column{webhooksColumn()}
	k.Strategy = &typedStrategy[*admissionregistrationv1.ValidatingWebhookConfiguration]{
		name: nameDNSSubdomain,
		newObj: func() *admissionregistrationv1.ValidatingWebhookConfiguration {
			return &admissionregistrationv1.ValidatingWebhookConfiguration{}
		},
		validate: func(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
			hooks := make([]webhookView, len(c.Webhooks))
			for i, w := range c.Webhooks {
				hooks[i] = webhookView{w.Name, w.ClientConfig, w.SideEffects, w.AdmissionReviewVersions}
			}
			var in admissionregistration.ValidatingWebhookConfiguration
			return append(validateWebhooks(hooks), matchConditionErrors(c, &in, func() field.ErrorList {
				return admissionregistrationvalidation.ValidateValidatingWebhookConfiguration(&in)
			})...)
		},
	}
	return &k
}

func webhooksColumn() Column {
	return Column{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration",
		Cell: func(obj *unstructured.Unstructured) any { return count(obj, "webhooks") }}
}

// matchConditionErrors are upstream's errors about the webhooks' matchConditions (names,
// CEL expressions that compile to a bool, at most 64): it converts v1 into the internal
// type in, runs upstream's validation of the whole configuration and keeps those. The rest
// of the configuration is validateWebhooks'.
func matchConditionErrors(v1obj, in any, validate func() field.ErrorList) field.ErrorList {
	if err := legacyscheme.Scheme.Convert(v1obj, in, nil); err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("webhooks"), err)}
	}
	var out field.ErrorList
	for _, e := range validate() {
		if strings.Contains(e.Field, ".matchConditions") {
			out = append(out, e)
		}
	}
	return out
}

// webhookView is what the two webhook kinds share for validation.
type webhookView struct {
	name         string
	clientConfig admissionregistrationv1.WebhookClientConfig
	sideEffects  *admissionregistrationv1.SideEffectClass
	reviews      []string
}

// validateWebhooks checks the v1 rules that keep a configuration callable: unique qualified
// names (at least three DNS segments), exactly one of url and service, sideEffects None or
// NoneOnDryRun, admissionReviewVersions present.
func validateWebhooks(hooks []webhookView) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, w := range hooks {
		fld := field.NewPath("webhooks").Index(i)
		switch {
		case w.name == "":
			errs = append(errs, field.Required(fld.Child("name"), ""))
		case seen[w.name]:
			errs = append(errs, field.Duplicate(fld.Child("name"), w.name))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(w.name) {
				errs = append(errs, field.Invalid(fld.Child("name"), w.name, msg))
			}
			if segs := len(splitDots(w.name)); segs < 3 {
				errs = append(errs, field.Invalid(fld.Child("name"), w.name, "should be a domain with at least three segments separated by dots"))
			}
		}
		seen[w.name] = true
		cc := fld.Child("clientConfig")
		switch hasURL, hasSvc := w.clientConfig.URL != nil, w.clientConfig.Service != nil; {
		case hasURL == hasSvc:
			errs = append(errs, field.Required(cc, "exactly one of url or service is required"))
		case hasSvc && w.clientConfig.Service.Name == "":
			errs = append(errs, field.Required(cc.Child("service", "name"), "service name is required"))
		case hasSvc && w.clientConfig.Service.Namespace == "":
			errs = append(errs, field.Required(cc.Child("service", "namespace"), "service namespace is required"))
		}
		supported := []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}
		if w.sideEffects == nil {
			errs = append(errs, field.Required(fld.Child("sideEffects"), fmt.Sprintf("must specify one of %v", supported)))
		} else if !contains(supported, string(*w.sideEffects)) {
			errs = append(errs, field.NotSupported(fld.Child("sideEffects"), *w.sideEffects, supported))
		}
		if len(w.reviews) == 0 {
			errs = append(errs, field.Required(fld.Child("admissionReviewVersions"), "must specify one of v1, v1beta1"))
		}
	}
	return errs
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
