package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

type props = map[string]apiextensionsv1.JSONSchemaProps

func str() apiextensionsv1.JSONSchemaProps { return apiextensionsv1.JSONSchemaProps{Type: "string"} }

func dnsLabel() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](40),
		Pattern: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`}
}

func strings_(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
}

func enum(vals ...string) apiextensionsv1.JSONSchemaProps {
	p := str()
	for _, v := range vals {
		p.Enum = append(p.Enum, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return p
}

func duration() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", Pattern: `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
}

func object(required []string, p props) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Required: required, Properties: p}
}

func subjects() apiextensionsv1.JSONSchemaProps {
	s := object([]string{"kind", "name"}, props{"kind": enum("User", "Group"), "name": str()})
	return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &s}}
}

// dependsOn is the schema of spec.dependsOn, on every kind.
func dependsOn() apiextensionsv1.JSONSchemaProps {
	ref := object([]string{"kind", "name"}, props{
		"kind":      {Type: "string", Pattern: `^[A-Z][A-Za-z0-9]*$`, MaxLength: ptr[int64](63)},
		"name":      {Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](253)},
		"namespace": {Type: "string", MaxLength: ptr[int64](63)},
	})
	return apiextensionsv1.JSONSchemaProps{Type: "array", MaxItems: ptr[int64](64), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &ref}}
}

func col(name, typ, path string) apiextensionsv1.CustomResourceColumnDefinition {
	return apiextensionsv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path}
}

func ptr[T any](v T) *T { return &v }

// CRDs are the CustomResourceDefinitions of the platform kinds, each with the phase
// transition rule of table (lifecycle.DefaultTransitions when nil).
func CRDs(table lifecycle.TransitionTable) []*apiextensionsv1.CustomResourceDefinition {
	base := lifecycle.CRDOptions{Group: Group, Version: Version, Categories: []string{"kubeos"}, Transitions: table}
	with := func(f func(o *lifecycle.CRDOptions)) *apiextensionsv1.CustomResourceDefinition {
		o := base
		f(&o)
		if o.Spec.Properties == nil {
			o.Spec.Properties = props{}
		}
		o.Spec.Properties["dependsOn"] = dependsOn()
		return lifecycle.CRD(o)
	}
	envs := strings_(dnsLabel())
	envs.MinItems = ptr[int64](1)
	envs.XListType = ptr("set")
	return []*apiextensionsv1.CustomResourceDefinition{
		with(func(o *lifecycle.CRDOptions) {
			o.Kind, o.ShortNames = "Tenant", []string{"tn"}
			o.Spec = object([]string{"environments"}, props{"environments": envs, "admins": subjects()})
			o.Status = props{"namespaces": strings_(str())}
			o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Environments", "string", ".spec.environments")}
		}),
		with(func(o *lifecycle.CRDOptions) {
			o.Kind, o.ShortNames = "Quota", []string{"kq"}
			limit := object([]string{"resource", "max"}, props{"resource": str(), "namespace": str(),
				"max": {Type: "integer", Format: "int64", Minimum: ptr[float64](0)}})
			usage := object(nil, props{"resource": str(), "namespace": str(),
				"used": {Type: "integer", Format: "int64"}, "max": {Type: "integer", Format: "int64"}})
			o.Spec = object([]string{"tenant", "limits"}, props{"tenant": dnsLabel(),
				"limits": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &limit}}})
			o.Status = props{"usage": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &usage}}}
			o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Tenant", "string", ".spec.tenant")}
		}),
		with(func(o *lifecycle.CRDOptions) {
			o.Kind, o.Plural, o.Singular, o.ShortNames = "AccessPolicy", "accesspolicies", "accesspolicy", []string{"ap"}
			o.Spec = object([]string{"tenant", "subjects", "allowedEnvs"}, props{"tenant": dnsLabel(), "subjects": subjects(),
				"allowedEnvs": strings_(dnsLabel()), "via": strings_(str())})
			o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Tenant", "string", ".spec.tenant"),
				col("Allowed", "string", ".spec.allowedEnvs")}
		}),
		with(func(o *lifecycle.CRDOptions) {
			o.Kind, o.Plural, o.Singular, o.ShortNames, o.Namespaced = "SecretPolicy", "secretpolicies", "secretpolicy", []string{"sp"}, true
			rule := object([]string{"secretNames", "kinds"}, props{"secretNames": strings_(str()), "kinds": strings_(str())})
			o.Spec = object([]string{"rules"}, props{"rules": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &rule}}})
		}),
		with(func(o *lifecycle.CRDOptions) {
			o.Kind, o.ShortNames, o.Namespaced = "Credential", []string{"cred"}, true
			o.Spec = object([]string{"type"}, props{
				"type":           enum(CredentialPassword, CredentialToken, CredentialKeyPair),
				"length":         {Type: "integer", Minimum: ptr[float64](8), Maximum: ptr[float64](4096)},
				"secretName":     dnsLabel(),
				"rotationPeriod": duration(),
			})
			o.Status = props{"secretName": str(), "lastRotated": {Type: "string", Format: "date-time"},
				"rotations": {Type: "integer", Format: "int64"}}
			o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Type", "string", ".spec.type"),
				col("Secret", "string", ".status.secretName"), col("Rotated", "date", ".status.lastRotated")}
		}),
		with(func(o *lifecycle.CRDOptions) {
			o.Kind, o.ShortNames, o.Namespaced = "Certificate", []string{"kcert"}, true
			o.Spec = object(nil, props{"dnsNames": strings_(str()), "commonName": str(), "secretName": dnsLabel(),
				"issuer": str(), "isCA": {Type: "boolean"}, "duration": duration(), "renewBefore": duration()})
			o.Status = props{"notBefore": {Type: "string", Format: "date-time"}, "notAfter": {Type: "string", Format: "date-time"},
				"serialNumber": str(), "renewals": {Type: "integer", Format: "int64"}}
			o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("DNS", "string", ".spec.dnsNames"),
				col("Issuer", "string", ".spec.issuer"), col("Not After", "string", ".status.notAfter")}
		}),
		with(databaseCRD),
		with(cacheCRD),
		with(topicCRD),
		with(bucketCRD),
		with(backupCRD),
		with(alertCRD),
		with(volumeCRD),
		with(componentCRD),
		with(routeCRD),
		with(releaseCRD),
		with(applicationCRD),
	}
}
