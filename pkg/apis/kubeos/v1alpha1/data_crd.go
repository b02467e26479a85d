package v1alpha1

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// Schema pieces shared by the data kinds' CRDs.

// dataSpec is the spec properties every data kind has (server, deletionPolicy; dependsOn is
// added to every kind by CRDs), plus p.
func dataSpec(p props, policies ...string) props {
	if len(policies) == 0 {
		policies = []string{DeletionRetain, DeletionDelete}
	}
	out := props{"server": dnsSubdomain(), "deletionPolicy": enum(policies...)}
	for k, v := range p {
		out[k] = v
	}
	return out
}

// dataStatus is the status properties every data kind has, plus p.
func dataStatus(p props) props {
	out := props{"server": str(), "connectionSecret": str()}
	for k, v := range p {
		out[k] = v
	}
	return out
}

func dnsSubdomain() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr[int64](253),
		Pattern: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`}
}

func passwordFrom() apiextensionsv1.JSONSchemaProps {
	return object([]string{"credential"}, props{"credential": dnsSubdomain()})
}

func restoreFrom() apiextensionsv1.JSONSchemaProps {
	return object([]string{"backup"}, props{"backup": dnsSubdomain(), "archive": {Type: "string", MaxLength: ptr[int64](1024)}})
}

func quantity() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
		Pattern: `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`}
}

func integer(min int64) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64", Minimum: ptr(float64(min))}
}

func int32At(min int64) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: ptr(float64(min))}
}

func date() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}
}

func array(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
}

func stringMap() apiextensionsv1.JSONSchemaProps {
	s := str()
	return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &s}}
}

// immutable is a CEL rule refusing a change of the field once set.
func immutable(p apiextensionsv1.JSONSchemaProps, field string) apiextensionsv1.JSONSchemaProps {
	p.XValidations = append(p.XValidations, apiextensionsv1.ValidationRule{Rule: "self == oldSelf", Message: field + " is immutable"})
	return p
}
