package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

func databaseCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Database", []string{"kdb"}, true
	ident := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](63),
		Pattern: `^[a-z_][a-z0-9_]*$`}
	grant := object([]string{"database", "privileges"}, props{"database": dnsSubdomain(), "namespace": dnsLabel(),
		"privileges": strings_(enum("CONNECT", "TEMPORARY", "CREATE", "SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "ALL"))})
	o.Spec = object(nil, dataSpec(props{
		"passwordFrom":    passwordFrom(),
		"databaseName":    immutable(ident, "databaseName"),
		"extensions":      strings_(apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](63), Pattern: `^[a-z0-9_-]+$`}),
		"schemas":         strings_(ident),
		"connectionLimit": {Type: "integer", Format: "int32", Minimum: ptr[float64](-1)},
		"grants":          array(grant),
		"restoreFrom":     restoreFrom(),
		"mode":            enum(DatabaseShared, DatabaseDedicated),
		"engine":          enum("postgresql"),
		"version":         str(),
		"replicas":        int32At(1),
		"storageSize":     quantity(),
	}))
	o.Status = dataStatus(props{"databaseName": str(), "role": str(), "observedSizeBytes": integer(0)})
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Server", "string", ".status.server"),
		col("Database", "string", ".status.databaseName"), col("Size", "integer", ".status.observedSizeBytes")}
}
