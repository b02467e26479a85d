package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

func alertCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Alert", []string{"kalert"}, true
	receiver := object(nil, props{
		"webhook":      object([]string{"url"}, props{"url": {Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](2048)}}),
		"alertmanager": object([]string{"server"}, props{"server": dnsSubdomain()}),
		"events":       {Type: "object"},
	})
	o.Spec = object([]string{"expr"}, props{
		"expr":          {Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](16384)},
		"for":           duration(),
		"keepFiringFor": duration(),
		"labels":        stringMap(),
		"annotations":   stringMap(),
		"receivers":     array(receiver),
		"server":        dnsSubdomain(),
	})
	o.Status = props{"state": enum(AlertInactive, AlertPending, AlertFiring), "activeSince": date(),
		"lastEvaluation": date(), "lastError": str(), "value": str()}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("State", "string", ".status.state"),
		col("Since", "date", ".status.activeSince")}
}
