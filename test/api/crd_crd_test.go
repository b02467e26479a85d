package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func clients(t *testing.T) (apiextclient.Interface, dynamic.Interface, *rest.Config) {
	t.Helper()
	cfg, err := crdSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ContentType = "application/json"
	ext, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ext, dyn, cfg
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// crdFromJSON builds a CRD from JSON (easier to read than Go literals of schemas).
func crdFromJSON(t *testing.T, s string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal([]byte(s), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func simpleCRD(t *testing.T, group, plural, kind string, shortNames ...string) *apiextensionsv1.CustomResourceDefinition {
	sn, _ := json.Marshal(shortNames)
	return crdFromJSON(t, fmt.Sprintf(`{"metadata":{"name":"%s.%s"},"spec":{"group":"%s","scope":"Namespaced",
		"names":{"plural":"%s","kind":"%s","shortNames":%s},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}`,
		plural, group, group, plural, kind, sn))
}

func waitCondition(t *testing.T, ext apiextclient.Interface, name string, cond apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var last *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = crd
		for _, c := range crd.Status.Conditions {
			if c.Type == cond && c.Status == status {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s: condition %s=%s not reached: %v; status %+v", name, cond, status, err, last.Status)
	}
	return last
}

func causes(err error) []string {
	var out []string
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Details != nil {
		for _, c := range se.Status().Details.Causes {
			out = append(out, c.Field+": "+c.Message)
		}
	}
	return out
}

// TestInvalidCRD: invalid CRDs are refused with 422 and upstream's causes.
func TestInvalidCRD(t *testing.T) {
	crdSuite.Need(t)
	ext, _, _ := clients(t)
	ctx := ctxT(t, 30*time.Second)
	tests := []struct {
		name  string
		crd   string
		wants []string
	}{
		{"bad names", `{"metadata":{"name":"Bad_Things.bad.example.com"},"spec":{"group":"bad.example.com","scope":"Namespaced",
			"names":{"plural":"Bad_Things","kind":"bad thing"},
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`,
			[]string{"metadata.name", "spec.names.plural", "spec.names.kind"}},
		{"non-structural schema", `{"metadata":{"name":"things.bad.example.com"},"spec":{"group":"bad.example.com","scope":"Namespaced",
			"names":{"plural":"things","kind":"Thing"},
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"properties":{"a":{"type":"string"}}}}}}}]}}`,
			[]string{"spec.validation.openAPIV3Schema.properties[spec].type: Required value"}},
		{"invalid CEL rule", `{"metadata":{"name":"things.bad.example.com"},"spec":{"group":"bad.example.com","scope":"Namespaced",
			"names":{"plural":"things","kind":"Thing"},
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
				"x-kubernetes-validations":[{"rule":"self.a +"}],"properties":{"a":{"type":"integer"}}}}}}}]}}`,
			[]string{"x-kubernetes-validations[0].rule", "compilation failed"}},
		{"CEL rule over its cost budget", `{"metadata":{"name":"things.bad.example.com"},"spec":{"group":"bad.example.com","scope":"Namespaced",
			"names":{"plural":"things","kind":"Thing"},
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
				"properties":{"l":{"type":"array","items":{"type":"string"},
				"x-kubernetes-validations":[{"rule":"self.all(x, self.all(y, self.all(z, x + y + z != '')))"}]}}}}}}}]}}`,
			[]string{"x-kubernetes-validations[0].rule", "cost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crdFromJSON(t, tt.crd), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want 422 Invalid", err)
			}
			all := strings.Join(causes(err), "\n")
			for _, w := range tt.wants {
				if !strings.Contains(all, w) {
					t.Errorf("causes lack %q:\n%s", w, all)
				}
			}
		})
	}
}

// TestNameConflict: a CRD whose names another CRD already has is accepted, with
// NamesAccepted=False and the reason of the name (here ShortNamesConflict), and is not
// established until the name is free, as upstream.
func TestNameConflict(t *testing.T) {
	crdSuite.Need(t)
	ext, _, _ := clients(t)
	ctx := ctxT(t, 30*time.Second)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, simpleCRD(t, "conflict.example.com", "widgets", "Widget", "wd"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "widgets.conflict.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	if _, err := crds.Create(ctx, simpleCRD(t, "conflict.example.com", "gadgets", "Gadget", "wd"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a CRD with a taken short name must be accepted: %v", err)
	}
	crd := waitCondition(t, ext, "gadgets.conflict.example.com", apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted && (c.Reason != "ShortNamesConflict" || c.Message != `"wd" is already in use`) {
			t.Errorf("NamesAccepted: %+v", c)
		}
	}
	// Built-in names of the group are taken too.
	if _, err := crds.Create(ctx, simpleCRD(t, "apiextensions.k8s.io", "customresourcedefinitions2", "CustomResourceDefinition"), metav1.CreateOptions{}); err == nil {
		waitCondition(t, ext, "customresourcedefinitions2.apiextensions.k8s.io", apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)
	}
	// Deleting the holder frees the name.
	if err := crds.Delete(ctx, "widgets.conflict.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "gadgets.conflict.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
}

// TestDeletionAndDiscovery: a CRD shows in discovery and OpenAPI (the time it took is logged;
// bench/crdbench measures it beside thousands of CRDs); deleting it deletes its custom
// resources, then it goes, and discovery and OpenAPI drop it.
func TestDeletionAndDiscovery(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, cfg := clients(t)
	ctx := ctxT(t, 60*time.Second)
	disc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	start := time.Now()
	if _, err := crds.Create(ctx, simpleCRD(t, "gone.example.com", "crons", "Cron"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	visible := func() (bool, bool) {
		rl, err := disc.ServerResourcesForGroupVersion("gone.example.com/v1")
		inDisc := err == nil && len(rl.APIResources) > 0 && rl.APIResources[0].Name == "crons"
		raw, err := disc.RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctx)
		inOAPI := err == nil && strings.Contains(string(raw), `"apis/gone.example.com/v1"`)
		return inDisc, inOAPI
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		d, o := visible()
		return d && o, nil
	}); err != nil {
		t.Fatalf("CRD not in discovery and OpenAPI v3 30 s after its creation")
	}
	t.Logf("in discovery and OpenAPI after %s", time.Since(start).Round(time.Millisecond))
	waitCondition(t, ext, "crons.gone.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gvr := schema.GroupVersionResource{Group: "gone.example.com", Version: "v1", Resource: "crons"}
	for _, name := range []string{"a", "b"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gone.example.com/v1", "kind": "Cron", "metadata": map[string]any{"name": name}, "spec": map[string]any{"x": int64(1)}}}
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := crds.Delete(ctx, "crons.gone.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, "crons.gone.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("CRD still there after its deletion: %v", err)
	}
	if d, o := visible(); d || o {
		t.Errorf("deleted CRD still in discovery (%v) or OpenAPI (%v)", d, o)
	}
	// Re-created, it has no custom resources: they were deleted with it.
	if _, err := crds.Create(ctx, simpleCRD(t, "gone.example.com", "crons", "Cron"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "crons.gone.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("custom resources survived their CRD's deletion: %d", len(list.Items))
	}
}
