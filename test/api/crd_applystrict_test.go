package api

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A server-side apply with fieldValidation=Strict names unknown fields as kube-apiserver's
// field manager does (".metadata.unknownMeta: field not declared in schema"), and duplicate
// keys with the YAML decoder's line ("line 7: key \"a\" already set in map") — what the
// conformance suite's FieldValidation tests look for.
func TestApplyStrictMessages(t *testing.T) {
	crdSuite.Need(t)
	ext, _, _ := clients(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, simpleCRD(t, "applystrict.example.com", "gadgets", "Gadget"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "gadgets.applystrict.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	apply := func(body string) string {
		res, _ := ext.Discovery().RESTClient().Patch(types.ApplyPatchType).
			AbsPath("/apis/applystrict.example.com/v1/namespaces/default/gadgets/g").
			Param("fieldManager", "m").Param("fieldValidation", "Strict").Body([]byte(body)).DoRaw(ctx)
		return string(res)
	}
	got := apply("apiVersion: applystrict.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n  unknownMeta: x\nunknownField: y\nspec:\n  a: 1\n")
	for _, want := range []string{`.metadata.unknownMeta: field not declared in schema`, `.unknownField: field not declared in schema`, `"code":400`} {
		if !strings.Contains(got, want) {
			t.Errorf("unknown fields: %q lacks %q", got, want)
		}
	}
	got = apply("apiVersion: applystrict.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  a: 1\n  a: 2\n")
	if !strings.Contains(got, `line 7: key \"a\" already set in map`) || !strings.Contains(got, `"code":400`) {
		t.Errorf("duplicate keys: %q", got)
	}
}
