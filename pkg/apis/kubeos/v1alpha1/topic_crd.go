package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

func topicCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Topic", []string{"ktopic"}, true
	subject := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](255),
		Pattern: `^[^\s]+$`}
	o.Spec = object(nil, dataSpec(props{
		"subjects":    strings_(subject),
		"retention":   enum(RetentionLimits, RetentionInterest, RetentionWorkQueue),
		"maxAge":      duration(),
		"maxBytes":    integer(0),
		"replicas":    int32At(1),
		"storage":     immutable(enum(StorageFile, StorageMemory), "storage"),
		"restoreFrom": restoreFrom(),
	}))
	o.Status = dataStatus(props{"stream": str(), "messages": integer(0), "bytes": integer(0), "consumers": integer(0)})
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Stream", "string", ".status.stream"),
		col("Messages", "integer", ".status.messages")}
}
