package api

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubeos.dev/kube/internal/storage"
)

// legacyCRD is a CRD as an older server could have stored it: spec has properties but no
// type, which v1 validation refuses on create. It goes into etcd directly.
const legacyCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
	"metadata":{"name":"relics.legacy.example.com","generation":1,"finalizers":["customresourcecleanup.apiextensions.k8s.io"]},
	"spec":{"group":"legacy.example.com","scope":"Namespaced","conversion":{"strategy":"None"},
	 "names":{"plural":"relics","singular":"relic","kind":"Relic","listKind":"RelicList"},
	 "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
	   "properties":{"spec":{"properties":{"age":{"type":"integer"}}}}}}}]},
	"status":{"storedVersions":["v1"]}}`

// TestNonStructuralSchemaCondition: a stored CRD whose schema is not structural gets
// NonStructuralSchema=True with reason Violations and the violations, and is still
// established and served, as with kube-apiserver; once its schema is made structural the
// condition goes. An ordinary CRD never gets the condition.
func TestNonStructuralSchemaCondition(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 60*time.Second)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()

	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(legacyCRD), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.Now())
	if _, err := crdSrv.Inner().Store.Create(ctx, storage.Key(apiextensionsv1.GroupName, "customresourcedefinitions", "", obj.GetName()), obj); err != nil {
		t.Fatal(err)
	}
	const name = "relics.legacy.example.com"
	t.Cleanup(func() { _ = crds.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	crd := waitCondition(t, ext, name, apiextensionsv1.NonStructuralSchema, apiextensionsv1.ConditionTrue)
	want := "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
	if c := findCondition(crd, apiextensionsv1.NonStructuralSchema); c.Reason != "Violations" || c.Message != want {
		t.Errorf("NonStructuralSchema: reason %q message %q, want Violations and %q", c.Reason, c.Message, want)
	}
	// Still served: upstream establishes and serves a non-structural CRD.
	waitCondition(t, ext, name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gvr := schema.GroupVersionResource{Group: "legacy.example.com", Version: "v1", Resource: "relics"}
	relic := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "legacy.example.com/v1", "kind": "Relic",
		"metadata": map[string]any{"name": "vase"}, "spec": map[string]any{"age": int64(3000)}}}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, relic, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a custom resource of the non-structural CRD: %v", err)
	}

	// What a user sees.
	bin, err := findKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	k := &kubectlRun{t: t, bin: bin, home: t.TempDir()}
	if got := k.ok("", "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="NonStructuralSchema")].status} {.status.conditions[?(@.type=="NonStructuralSchema")].reason}`); got != "True Violations" {
		t.Errorf("kubectl: NonStructuralSchema %q, want %q", got, "True Violations")
	}

	// Made structural (an update may keep a non-structural schema, or fix it): the
	// condition is removed.
	cur, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"age": {Type: "integer"}}}
	if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoCondition(t, ext, name, apiextensionsv1.NonStructuralSchema)

	// An ordinary CRD: its first status write (Established) comes without the condition.
	if _, err := crds.Create(ctx, simpleCRD(t, "legacy.example.com", "tablets", "Tablet"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), "tablets.legacy.example.com", metav1.DeleteOptions{}) })
	crd = waitCondition(t, ext, "tablets.legacy.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	if c := findCondition(crd, apiextensionsv1.NonStructuralSchema); c != nil {
		t.Errorf("a structural CRD has %+v", *c)
	}
}

func findCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// waitNoCondition waits until the CRD has no condition of type cond.
func waitNoCondition(t *testing.T, ext apiextclient.Interface, name string, cond apiextensionsv1.CustomResourceDefinitionConditionType) {
	t.Helper()
	var last *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = crd
		return findCondition(crd, cond) == nil, nil
	})
	if err != nil {
		t.Fatalf("CRD %s: condition %s still there: %v; status %+v", name, cond, err, last.Status)
	}
}
