package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

func bucketCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Bucket", []string{"kbucket"}, true
	name := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](3), MaxLength: ptr[int64](63),
		Pattern: `^[a-z0-9][a-z0-9.-]*[a-z0-9]$`}
	o.Spec = object(nil, dataSpec(props{
		"bucketName": immutable(name, "bucketName"),
		"existing":   {Type: "boolean"},
		"versioning": {Type: "boolean"},
		"quotaHint":  quantity(),
	}, DeletionRetain, DeletionDelete, DeletionDeleteIfEmpty))
	o.Status = dataStatus(props{"bucketName": str(), "endpoint": str(), "usageBytes": integer(0), "accessKeyID": str()})
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Bucket", "string", ".status.bucketName"),
		col("Usage", "integer", ".status.usageBytes")}
}
