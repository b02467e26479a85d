package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

func backupCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Backup", []string{"kbackup"}, true
	run := object(nil, props{"time": date(), "archive": str(), "sizeBytes": integer(0), "duration": duration(), "error": str()})
	o.Spec = object([]string{"source", "target"}, props{
		"source":   object([]string{"kind", "name"}, props{"kind": enum("Database", "Cache", "Topic", "Volume"), "name": dnsSubdomain()}),
		"target":   object([]string{"bucket"}, props{"bucket": dnsSubdomain()}),
		"schedule": {Type: "string", MaxLength: ptr[int64](128)},
		"timeZone": {Type: "string", MaxLength: ptr[int64](64)},
		"retention": object(nil, props{"keepLast": int32At(0), "keepDaily": int32At(0), "keepWeekly": int32At(0),
			"ttl": duration()}),
		"suspend":        {Type: "boolean"},
		"deletionPolicy": enum(DeletionRetain, DeletionDelete),
	})
	o.Status = props{"lastSuccessful": run, "lastFailure": object(nil, props{"time": date(), "error": str()}),
		"history": array(run), "nextRun": date()}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Source", "string", ".spec.source.name"),
		col("Schedule", "string", ".spec.schedule"), col("Last", "date", ".status.lastSuccessful.time")}
}
