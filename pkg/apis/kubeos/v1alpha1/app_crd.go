package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Schemas of the application kinds: Volume, Component, Route, Release, Application. Fields
// typed by core/v1 (env, resources, probes) are kept as objects and validated by upstream's
// validation of the workload the driver writes (and by the kinds' admission validators).

func opaque() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
}

func opaqueList() apiextensionsv1.JSONSchemaProps { return array(opaque()) }

func int32In(min, max float64) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: &min, Maximum: &max}
}

func conditions() apiextensionsv1.JSONSchemaProps {
	c := object([]string{"type", "status"}, props{"type": str(), "status": str(), "reason": str(), "message": str(),
		"lastTransitionTime": date(), "observedGeneration": {Type: "integer", Format: "int64"}})
	return array(c)
}

func volumeCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Volume", []string{"kvol"}, true
	o.Spec = object([]string{"size"}, props{
		"size":           quantity(),
		"accessMode":     enum("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"),
		"storageClass":   dnsSubdomain(),
		"perReplica":     {Type: "boolean"},
		"deletionPolicy": enum(DeletionRetain, DeletionDelete),
		"restoreFrom":    restoreFrom(),
	})
	o.Status = props{"claimName": str(), "volumeName": str(), "capacity": quantity(), "storageClass": str(), "node": str(),
		"restored": object([]string{"backup", "archive", "time"}, props{"backup": str(), "archive": str(), "time": date()})}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Size", "string", ".spec.size"),
		col("Class", "string", ".status.storageClass"), col("Claim", "string", ".status.claimName")}
}

func componentCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Component", []string{"comp"}, true
	port := object([]string{"port"}, props{"name": {Type: "string", MaxLength: ptr[int64](15)}, "port": int32In(1, 65535),
		"protocol": enum("TCP", "UDP")})
	use := object([]string{"kind", "name"}, props{"kind": enum("Database", "Cache", "Topic", "Bucket", "Volume"),
		"name": dnsSubdomain(), "as": dnsLabel(), "mountPath": {Type: "string", MaxLength: ptr[int64](4096)}})
	o.Spec = object([]string{"image"}, props{
		"workload":  enum(WorkloadDeployment, WorkloadStatefulSet, WorkloadJob, WorkloadCronJob),
		"image":     {Type: "string", MinLength: ptr[int64](1), MaxLength: ptr[int64](1024)},
		"command":   strings_(str()),
		"args":      strings_(str()),
		"env":       opaqueList(),
		"resources": opaque(),
		"replicas":  int32At(0),
		"autoscaling": object([]string{"maxReplicas"}, props{"minReplicas": int32At(1), "maxReplicas": int32At(1),
			"targetCPUUtilizationPercentage": int32In(1, 100)}),
		"livenessProbe":  opaque(),
		"readinessProbe": opaque(),
		"schedule":       {Type: "string", MaxLength: ptr[int64](128)},
		"exposes":        array(port),
		"uses":           array(use),
	})
	o.Status = props{"workload": object(nil, props{"kind": str(), "name": str()}), "service": str(),
		"replicas": int32At(0), "readyReplicas": int32At(0), "updatedReplicas": int32At(0), "image": str(), "release": str()}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Image", "string", ".status.image"),
		col("Ready", "integer", ".status.readyReplicas"), col("Replicas", "integer", ".status.replicas")}
}

func routeCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Route", []string{"kroute"}, true
	hostname := apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr[int64](253),
		Pattern: `^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`}
	value := object([]string{"name", "value"}, props{"type": enum(MatchExact, MatchRegularExpression), "name": str(), "value": str()})
	match := object(nil, props{
		"path":        object([]string{"value"}, props{"type": enum(PathExact, PathPrefix, MatchRegularExpression), "value": {Type: "string", MaxLength: ptr[int64](1024)}}),
		"headers":     array(value),
		"queryParams": array(value),
		"method":      enum("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"),
	})
	header := object([]string{"name", "value"}, props{"name": str(), "value": str()})
	modifier := object(nil, props{"set": array(header), "add": array(header), "remove": strings_(str())})
	filter := object([]string{"type"}, props{
		"type": enum(FilterRequestRedirect, FilterRequestHeaderModifier, FilterResponseHeaderModifier, FilterURLRewrite),
		"requestRedirect": object(nil, props{"scheme": enum("http", "https"), "hostname": hostname, "port": int32In(1, 65535),
			"path": str(), "statusCode": {Type: "integer", Format: "int32", Enum: []apiextensionsv1.JSON{{Raw: []byte("301")}, {Raw: []byte("302")}}}}),
		"requestHeaderModifier":  modifier,
		"responseHeaderModifier": modifier,
		"urlRewrite":             object(nil, props{"hostname": hostname, "replacePrefixMatch": str()}),
	})
	backend := object([]string{"component"}, props{"component": dnsSubdomain(), "port": int32In(1, 65535),
		"portName": str(), "weight": int32In(0, 1000000)})
	rule := object(nil, props{"matches": array(match), "filters": array(filter), "backends": array(backend),
		"timeout": duration(), "retries": int32In(0, 10)})
	hosts := strings_(hostname)
	hosts.MinItems = ptr[int64](1)
	rules := array(rule)
	rules.MinItems = ptr[int64](1)
	o.Spec = object([]string{"hostnames", "rules"}, props{"hostnames": hosts, "rules": rules,
		"tls": object([]string{"certificate"}, props{"certificate": dnsSubdomain()})})
	o.Status = props{"hostnames": array(object([]string{"hostname"}, props{"hostname": str(), "conditions": conditions()}))}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Hostnames", "string", ".spec.hostnames")}
}

func releaseCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Release", []string{"krel"}, true
	step := object(nil, props{"setWeight": int32In(0, 100), "pause": object(nil, props{"duration": duration()})})
	o.Spec = object([]string{"component"}, props{
		"component": dnsSubdomain(),
		"image":     {Type: "string", MaxLength: ptr[int64](1024)},
		"env":       opaqueList(),
		"strategy": object(nil, props{"type": enum(ReleaseRolling, ReleaseRecreate, ReleaseCanary), "steps": array(step),
			"analysis": object([]string{"alerts"}, props{"alerts": strings_(dnsSubdomain()), "duration": duration()})}),
		"progressDeadlineSeconds": int32At(1),
		"historyLimit":            int32At(1),
	})
	rev := object([]string{"revision"}, props{"revision": str(), "image": str(), "outcome": str(), "started": date(),
		"ended": date(), "message": str()})
	o.Status = props{"releasePhase": str(), "currentStep": int32At(0), "canaryWeight": int32At(0),
		"stableRevision": str(), "canaryRevision": str(), "pausedUntil": date(), "history": array(rev)}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Component", "string", ".spec.component"),
		col("Release", "string", ".status.releasePhase"), col("Step", "integer", ".status.currentStep"),
		col("Weight", "integer", ".status.canaryWeight")}
}

func applicationCRD(o *lifecycle.CRDOptions) {
	o.Kind, o.ShortNames, o.Namespaced = "Application", []string{"kapp"}, true
	o.Spec = object(nil, props{
		"components":       strings_(dnsSubdomain()),
		"selector":         opaque(),
		"environment":      dnsLabel(),
		"labels":           {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
		"defaultResources": opaque(),
	})
	row := object([]string{"name", "ready"}, props{"name": str(), "phase": str(), "ready": {Type: "boolean"}, "reason": str(), "message": str()})
	o.Status = props{"ready": str(), "components": array(row)}
	o.Columns = []apiextensionsv1.CustomResourceColumnDefinition{col("Ready", "string", ".status.ready")}
}
