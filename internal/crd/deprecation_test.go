package crd

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestDeprecationWarning: the custom text when set, else kube-apiserver's default, which
// names the newest served, not deprecated version newer than the deprecated one.
func TestDeprecationWarning(t *testing.T) {
	type ver struct {
		name               string
		served, deprecated bool
		warning            *string
	}
	custom, empty := "use v2, v1 goes away in 2027", ""
	for _, tc := range []struct {
		name     string
		versions []ver
		of       string
		want     string
	}{
		{"not deprecated", []ver{{"v1", true, false, nil}}, "v1", ""},
		{"custom text", []ver{{"v1", true, true, &custom}, {"v2", true, false, nil}}, "v1", custom},
		{"custom empty text: no warning", []ver{{"v1", true, true, &empty}, {"v2", true, false, nil}}, "v1", ""},
		{"no other version", []ver{{"v1", true, true, nil}}, "v1",
			"example.com/v1 Widget is deprecated"},
		{"newest served non-deprecated newer version", []ver{
			{"v1alpha1", true, true, nil}, {"v1beta1", true, false, nil}, {"v1", true, false, nil}, {"v2alpha1", true, false, nil}}, "v1alpha1",
			"example.com/v1alpha1 Widget is deprecated; use example.com/v1 Widget"},
		{"deprecated and unserved versions are skipped", []ver{
			{"v1alpha1", true, true, nil}, {"v1beta1", true, false, nil}, {"v1", true, true, nil}, {"v2", false, false, nil}}, "v1alpha1",
			"example.com/v1alpha1 Widget is deprecated; use example.com/v1beta1 Widget"},
		{"older versions are not suggested", []ver{{"v1beta1", true, false, nil}, {"v1", true, true, nil}}, "v1",
			"example.com/v1 Widget is deprecated"},
		{"a storage version not served is not suggested", []ver{{"v1beta1", true, true, nil}, {"v1", false, false, nil}}, "v1beta1",
			"example.com/v1beta1 Widget is deprecated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget"}}
			var of *apiextensionsv1.CustomResourceDefinitionVersion
			for _, v := range tc.versions {
				spec.Versions = append(spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v.name, Served: v.served, Deprecated: v.deprecated, DeprecationWarning: v.warning})
			}
			for i := range spec.Versions {
				if spec.Versions[i].Name == tc.of {
					of = &spec.Versions[i]
				}
			}
			if got := deprecationWarning(spec, of); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCompileDeprecationWarning: Compile sets the warning on the deprecated version's Kind
// only.
func TestCompileDeprecationWarning(t *testing.T) {
	kinds := compileJSON(t, `{"metadata":{"name":"gizmos.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
	"names":{"plural":"gizmos","kind":"Gizmo"},
	"versions":[
	 {"name":"v1beta1","served":true,"storage":false,"deprecated":true,"schema":{"openAPIV3Schema":{"type":"object"}}},
	 {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`)
	got := map[string]string{}
	for _, k := range kinds {
		got[k.Version] = k.DeprecationWarning
	}
	if got["v1beta1"] != "example.com/v1beta1 Gizmo is deprecated; use example.com/v1 Gizmo" || got["v1"] != "" {
		t.Errorf("warnings by version: %q", got)
	}
}
