package registry

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func TestConfigMapSchema(t *testing.T) {
	s := builtin(t, "", "configmaps").OpenAPISchema()
	if s == nil {
		t.Fatal("no schema")
	}
	if s.Description == "" {
		t.Error("ConfigMap has no description")
	}
	for _, p := range []string{"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"} {
		ps, ok := s.Properties[p]
		if !ok {
			t.Errorf("no property %s", p)
			continue
		}
		if ps.Description == "" {
			t.Errorf("%s has no description", p)
		}
	}
	if got := ref(s.Properties["metadata"]); got != "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
		t.Errorf("metadata $ref %q", got)
	}
	if d := s.Properties["data"]; d.Type[0] != "object" || d.AdditionalProperties.Schema.Type[0] != "string" {
		t.Errorf("data schema %+v", d)
	}
	if b := s.Properties["binaryData"].AdditionalProperties.Schema; b.Format != "byte" {
		t.Errorf("binaryData values %+v", b)
	}
	if s.Properties["immutable"].Type[0] != "boolean" {
		t.Errorf("immutable %+v", s.Properties["immutable"])
	}
	gvk, _ := json.Marshal(s.Extensions[extGVK])
	if string(gvk) != `[{"group":"","kind":"ConfigMap","version":"v1"}]` {
		t.Errorf("gvk extension %s", gvk)
	}
	if s.Required != nil {
		t.Errorf("ConfigMap required %v", s.Required)
	}
	if got := SchemaOf(corev1.ConfigMap{}); got.Description != s.Description {
		t.Errorf("SchemaOf differs from OpenAPISchema")
	}
}

func TestDefinitions(t *testing.T) {
	for name, defs := range map[string]map[string]spec.Schema{RefPrefixV2: Definitions(), RefPrefixV3: DefinitionsV3()} {
		prefix := name
		// Every $ref resolves.
		var roots []string
		for n := range defs {
			roots = append(roots, n)
		}
		for _, n := range Reachable(defs, prefix, roots...) {
			if _, ok := defs[n]; !ok {
				t.Errorf("%s: dangling $ref %s", prefix, n)
			}
		}
		if _, err := json.Marshal(defs); err != nil {
			t.Errorf("%s: %v", prefix, err)
		}
		b, _ := json.Marshal(defs["io.k8s.api.core.v1.ConfigMap"])
		if prefix == RefPrefixV3 && !strings.Contains(string(b), `"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]`) {
			t.Errorf("v3 ConfigMap: %s", b)
		}
	}
	defs := Definitions()
	check := func(name, want string) {
		t.Helper()
		b, _ := json.Marshal(defs[name])
		for _, w := range strings.Split(want, "|") {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: %s lacks %s", name, b, w)
			}
		}
	}
	check("io.k8s.apimachinery.pkg.apis.meta.v1.Time", `"type":"string"|"format":"date-time"`)
	check("io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime", `"format":"date-time"`)
	check("io.k8s.apimachinery.pkg.runtime.RawExtension", `"type":"object"|"x-kubernetes-preserve-unknown-fields":true`)
	check("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", `"ownerReferences":{|"x-kubernetes-patch-merge-key":"uid"|"x-kubernetes-patch-strategy":"merge"|"x-kubernetes-list-type":"map"`)
	check("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", `"required":["apiVersion","kind","name","uid"]`)
	check("io.k8s.api.core.v1.Event", `"required":["metadata","involvedObject"]`)
	check("io.k8s.api.rbac.v1.ClusterRole", `"rules":{`)
	check("io.k8s.api.rbac.v1.Subject", `"required":["kind","name"]`)
	check("io.k8s.api.rbac.v1.RoleRef", `"required":["apiGroup","kind","name"]`)
	check("io.k8s.api.rbac.v1.PolicyRule", `"required":["verbs"]`)
	check("io.k8s.api.events.v1.Event", `"required":["eventTime"]`)
	check("io.k8s.api.core.v1.ConfigMapList", `"x-kubernetes-group-version-kind":[{"group":"","kind":"ConfigMapList","version":"v1"}]`)
	check("io.k8s.api.core.v1.Secret", `"data":{|"additionalProperties":{"type":"string","format":"byte"}`)
	check("io.k8s.api.events.v1.Event", `"x-kubernetes-group-version-kind":[{"group":"events.k8s.io","kind":"Event","version":"v1"}]`)
	check("io.k8s.apimachinery.pkg.apis.meta.v1.Status", `"code":{`)
	if r := defs["io.k8s.api.rbac.v1.ClusterRole"].Required; len(r) != 0 {
		t.Errorf("ClusterRole required %v (rules is optional)", r)
	}
	// CRD's recursive schema type terminates through $refs.
	props := DefinitionName(apiextensionsv1.JSONSchemaProps{})
	if props != "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps" {
		t.Fatalf("name %s", props)
	}
	p := defs[props]
	if got := ref(*p.Properties["properties"].AdditionalProperties.Schema); got != RefPrefixV2+props {
		t.Errorf("JSONSchemaProps.properties values %q", got)
	}
	if p.Properties["x-kubernetes-preserve-unknown-fields"].Type[0] != "boolean" || p.Description == "" {
		t.Errorf("JSONSchemaProps %+v", p)
	}
	check(DefinitionName(apiextensionsv1.CustomResourceDefinitionSpec{}), `"required":["group","names","scope","versions"]`)
	if len(Reachable(defs, RefPrefixV2, "io.k8s.api.core.v1.ConfigMap")) > 10 {
		t.Errorf("ConfigMap reaches %v", Reachable(defs, RefPrefixV2, "io.k8s.api.core.v1.ConfigMap"))
	}
	// v3 spells the multi-type types as oneOf, as kube-apiserver does.
	b, _ := json.Marshal(DefinitionsOf(RefPrefixV3, intstr.IntOrString{})["io.k8s.apimachinery.pkg.util.intstr.IntOrString"])
	if !strings.Contains(string(b), `"oneOf":[{"type":"integer"},{"type":"string"}]`) {
		t.Errorf("v3 IntOrString %s", b)
	}
	b, _ = json.Marshal(DefinitionsOf(RefPrefixV2, intstr.IntOrString{})["io.k8s.apimachinery.pkg.util.intstr.IntOrString"])
	if !strings.Contains(string(b), `"type":"string","format":"int-or-string"`) {
		t.Errorf("v2 IntOrString %s", b)
	}
}

func TestSchemaOfOtherType(t *testing.T) {
	s := SchemaOf(&corev1.Pod{})
	if ref(s.Properties["spec"]) != RefPrefixV2+"io.k8s.api.core.v1.PodSpec" {
		t.Errorf("Pod spec %+v", s.Properties["spec"])
	}
	defs := DefinitionsOf(RefPrefixV2, &corev1.Pod{})
	c := defs["io.k8s.api.core.v1.Container"].Properties["ports"]
	if c.Extensions[extPatchMergeKey] != "containerPort" {
		t.Errorf("containers.ports extensions %v", c.Extensions)
	}
	if q := defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]; q.Type[0] != "string" {
		t.Errorf("Quantity %+v", q)
	}
}

func ref(s spec.Schema) string { return s.Ref.String() }
