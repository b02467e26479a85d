package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

func cacheCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.Plural, o.Singular, o.ShortNames, o.Namespaced = "Cache", "caches", "cache", []string{"kcache"}, true
	prefix := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](2), MaxLength: ptr[int64](200),
		Pattern: `^[A-Za-z0-9][-A-Za-z0-9_.:/]*$`}
	o.Spec = object(nil, dataSpec(props{
		"passwordFrom": passwordFrom(),
		"keyPrefix":    immutable(prefix, "keyPrefix"),
		"maxMemory":    quantity(),
		"restoreFrom":  restoreFrom(),
	}))
	o.Status = dataStatus(props{"user": str(), "keyPrefix": str()})
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Server", "string", ".status.server"),
		col("Prefix", "string", ".status.keyPrefix")}
}
