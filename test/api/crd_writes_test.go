package api

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
)

// scalableCRD is a namespaced CRD with status and scale subresources and a bounded
// spec.replicas.
func scalableCRD(t *testing.T, group string) *apiextensionsv1.CustomResourceDefinition {
	return crdFromJSON(t, `{"metadata":{"name":"pools.`+group+`"},"spec":{"group":"`+group+`","scope":"Namespaced",
		"names":{"plural":"pools","kind":"Pool"},
		"versions":[{"name":"v1","served":true,"storage":true,
			"subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
			"schema":{"openAPIV3Schema":{"type":"object","properties":{
				"spec":{"type":"object","properties":{"replicas":{"type":"integer","minimum":0,"maximum":9},"size":{"type":"string"}}},
				"status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}}}]}}`)
}

// TestCustomResourceWrites covers what clients other than kubectl send: a PUT of an
// autoscaling/v1 Scale (client-go's scale client, as the HPA uses it), updates without a
// resourceVersion, duplicate and unknown fields under fieldValidation, and the 404 and 415
// answers for what is not served.
func TestCustomResourceWrites(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, cfg := clients(t)
	ctx := ctxT(t, time.Minute)
	const group = "writes.example.com"
	crd := scalableCRD(t, group)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, crd.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "pools"}
	pools := dyn.Resource(gvr).Namespace("default")
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Pool",
		"metadata": map[string]any{"name": "p1"}, "spec": map[string]any{"replicas": int64(1), "size": "s"}}}
	if _, err := pools.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("scale client update", func(t *testing.T) {
		disc := memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg))
		sc, err := scale.NewForConfig(cfg, restmapper.NewDeferredDiscoveryRESTMapper(disc), dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
		if err != nil {
			t.Fatal(err)
		}
		gr := gvr.GroupResource()
		s, err := sc.Scales("default").Get(ctx, gr, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = 4
		got, err := sc.Scales("default").Update(ctx, gr, s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("scale update: %v", err)
		}
		if got.Spec.Replicas != 4 {
			t.Fatalf("scale answer has replicas %d, want 4", got.Spec.Replicas)
		}
		cur, err := pools.Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _, _ := unstructured.NestedInt64(cur.Object, "spec", "replicas"); n != 4 {
			t.Fatalf("spec.replicas = %d after the scale update, want 4", n)
		}
		// The scale write owns the replicas now, recorded against the parent with its
		// subresource, as upstream's scale handler records it.
		owner := ""
		for _, e := range cur.GetManagedFields() {
			if e.Subresource == "scale" && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"f:replicas"`) {
				owner = e.Manager
			}
		}
		if owner == "" {
			t.Fatalf("no managedFields entry of the scale subresource owns spec.replicas: %+v", cur.GetManagedFields())
		}
		// Server-side apply of a Scale to /scale: conflicts with that owner unless forced.
		applied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": "p1"}, "spec": map[string]any{"replicas": int64(5)}}}
		if _, err := pools.Apply(ctx, "p1", applied, metav1.ApplyOptions{FieldManager: "hpa"}, "scale"); !apierrors.IsConflict(err) {
			t.Fatalf("apply to /scale over another owner: want 409, got %v", err)
		}
		if _, err := pools.Apply(ctx, "p1", applied, metav1.ApplyOptions{FieldManager: "hpa", Force: true}, "scale"); err != nil {
			t.Fatalf("forced apply to /scale: %v", err)
		}
		if cur, err = pools.Get(ctx, "p1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := unstructured.NestedInt64(cur.Object, "spec", "replicas"); n != 5 {
			t.Fatalf("spec.replicas = %d after the apply to /scale, want 5", n)
		}
		// A stale Scale is a conflict; one out of the schema's bounds is invalid.
		if _, err := sc.Scales("default").Update(ctx, gr, s, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("stale scale update: want 409, got %v", err)
		}
		s, _ = sc.Scales("default").Get(ctx, gr, "p1", metav1.GetOptions{})
		other := s.DeepCopy()
		other.Name = "p2"
		if _, err := sc.Scales("default").Update(ctx, gr, other, metav1.UpdateOptions{}); err == nil {
			t.Fatal("a Scale whose name is not the URL's was accepted")
		}
		s.Spec.Replicas = 12
		if _, err := sc.Scales("default").Update(ctx, gr, s, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("scale update over the maximum: want 422, got %v", err)
		}
	})

	t.Run("update without resourceVersion", func(t *testing.T) {
		cur, err := pools.Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.SetResourceVersion("")
		_, err = pools.Update(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.resourceVersion: Invalid value: 0: must be specified for an update") {
			t.Fatalf("custom resource update without resourceVersion: want upstream's 422, got %v", err)
		}
		_, err = pools.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("status update without resourceVersion: want 422, got %v", err)
		}
		c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.ResourceVersion = ""
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, c, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("CRD update without resourceVersion: want 422, got %v", err)
		}
		// A missing object is still a 404, not a 422.
		cur.SetName("nope")
		if _, err := pools.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("update of a missing object without resourceVersion: want 404, got %v", err)
		}
	})

	t.Run("duplicate and unknown fields", func(t *testing.T) {
		rc := restClient(t, cfg)
		body := `{"apiVersion":"` + group + `/v1","kind":"Pool","metadata":{"name":"dup","foo":1},"spec":{"size":"a","size":"b","extra":1}}`
		err := rc.Post().AbsPath("/apis", group, "v1", "namespaces", "default", "pools").Param("fieldValidation", "Strict").
			Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		want := `Pool in version "v1" cannot be handled as a Pool: strict decoding error: duplicate field "spec.size", unknown field "metadata.foo", unknown field "spec.extra"`
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("strict create with duplicate and unknown fields:\n got %v\nwant 400 %q", err, want)
		}
		// Warn (the default) stores the object and says why in Warning headers.
		var warnings []string
		wc := rest.CopyConfig(cfg)
		wc.WarningHandler = warningRecorder(func(msg string) { warnings = append(warnings, msg) })
		rc = restClient(t, wc)
		if err := rc.Post().AbsPath("/apis", group, "v1", "namespaces", "default", "pools").
			Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(warnings, "; "); !strings.Contains(got, `duplicate field "spec.size"`) || !strings.Contains(got, `unknown field "spec.extra"`) || !strings.Contains(got, `unknown field "metadata.foo"`) {
			t.Fatalf("warnings = %q, want the duplicate and the unknown field", got)
		}
		stored, err := pools.Get(ctx, "dup", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedString(stored.Object, "spec", "size"); size != "b" {
			t.Fatalf("spec.size = %q, want the last duplicate %q", size, "b")
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "extra"); found {
			t.Fatal("the unknown field spec.extra was stored")
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, "metadata", "foo"); found {
			t.Fatal("the unknown field metadata.foo was stored")
		}
		// A merge patch cannot store unknown metadata either.
		patched, err := pools.Patch(ctx, "dup", types.MergePatchType, []byte(`{"metadata":{"bar":"x","labels":{"a":"b"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(patched.Object, "metadata", "bar"); found || patched.GetLabels()["a"] != "b" {
			t.Fatalf("after a merge patch of metadata.bar and a label: metadata %v", patched.Object["metadata"])
		}
	})

	t.Run("server-side apply", func(t *testing.T) {
		pool := func(spec map[string]any) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Pool", "metadata": map[string]any{"name": "applied"}}}
			if spec != nil {
				u.Object["spec"] = spec
			}
			return u
		}
		if _, err := pools.Apply(ctx, "applied", pool(map[string]any{"size": "s", "replicas": int64(2)}), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
			t.Fatal(err)
		}
		_, err := pools.Apply(ctx, "applied", pool(map[string]any{"size": "m"}), metav1.ApplyOptions{FieldManager: "bob"})
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "alice": .spec.size`) {
			t.Fatalf("conflicting apply: want 409 naming alice and .spec.size, got %v", err)
		}
		// A controller applies the status through the status subresource: no conflict with
		// the spec's owner, and its entry names the subresource.
		st := pool(nil)
		st.Object["status"] = map[string]any{"replicas": int64(2)}
		got, err := pools.ApplyStatus(ctx, "applied", st, metav1.ApplyOptions{FieldManager: "ctrl"})
		if err != nil {
			t.Fatal(err)
		}
		var entries []string
		for _, e := range got.GetManagedFields() {
			entries = append(entries, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
		}
		if strings.Join(entries, ",") != "alice/Apply/,ctrl/Apply/status" {
			t.Fatalf("managedFields: %v, want alice's Apply and ctrl's Apply on status", entries)
		}
		// alice stops applying spec.size: it goes; replicas and the status stay.
		got, err = pools.Apply(ctx, "applied", pool(map[string]any{"replicas": int64(2)}), metav1.ApplyOptions{FieldManager: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedString(got.Object, "spec", "size"); found {
			t.Fatalf("spec.size still there after its only applier stopped applying it: %v", got.Object["spec"])
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "status", "replicas"); n != 2 {
			t.Fatalf("status.replicas = %d after alice's apply, want 2", n)
		}
		// A field the schema does not have is dropped (fieldValidation Warn, the default),
		// and a value of the wrong type is the client's mistake: 400, not a 500.
		got, err = pools.Apply(ctx, "applied", pool(map[string]any{"replicas": int64(2), "bogus": "x"}), metav1.ApplyOptions{FieldManager: "alice"})
		if err != nil {
			t.Fatalf("apply with an unknown field: %v", err)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "bogus"); found {
			t.Fatal("apply stored a field the schema does not have")
		}
		if _, err := pools.Apply(ctx, "applied", pool(map[string]any{"replicas": true}), metav1.ApplyOptions{FieldManager: "alice"}); !apierrors.IsBadRequest(err) {
			t.Fatalf("apply of a boolean where an integer belongs: want 400, got %v", err)
		}
		// The schema still applies to what apply produces.
		if _, err := pools.Apply(ctx, "applied", pool(map[string]any{"replicas": int64(20)}), metav1.ApplyOptions{FieldManager: "alice"}); !apierrors.IsInvalid(err) {
			t.Fatalf("apply over the schema's maximum: want 422, got %v", err)
		}
	})

	t.Run("server-side apply across versions", func(t *testing.T) {
		two := crdFromJSON(t, `{"metadata":{"name":"things.`+group+`"},"spec":{"group":"`+group+`","scope":"Namespaced",
			"names":{"plural":"things","kind":"Thing"},
			"versions":[
				{"name":"v1beta1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}}}}},
				{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}}}}}]}}`)
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, two, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, ext, two.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
		thing := func(version string, spec map[string]any) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/" + version, "kind": "Thing",
				"metadata": map[string]any{"name": "t1"}, "spec": spec}}
		}
		beta := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "things"}).Namespace("default")
		v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}).Namespace("default")
		if _, err := beta.Apply(ctx, "t1", thing("v1beta1", map[string]any{"a": "p", "b": "q"}), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
			t.Fatal(err)
		}
		// The same manager, now in v1, stops applying spec.b: it goes, as in one version.
		got, err := v1.Apply(ctx, "t1", thing("v1", map[string]any{"a": "p"}), metav1.ApplyOptions{FieldManager: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedString(got.Object, "spec", "b"); found {
			t.Fatalf("spec.b survived its manager's apply in another version: %v", got.Object["spec"])
		}
		// Another manager in v1beta1 conflicts with alice's v1 field.
		if _, err := beta.Apply(ctx, "t1", thing("v1beta1", map[string]any{"a": "z"}), metav1.ApplyOptions{FieldManager: "bob"}); !apierrors.IsConflict(err) {
			t.Fatalf("apply over another version's owner: want 409, got %v", err)
		}
	})

	t.Run("not served and unsupported patch", func(t *testing.T) {
		rc := restClient(t, cfg)
		err := rc.Get().AbsPath("/apis", group, "v9", "namespaces", "default", "pools").Do(ctx).Error()
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "the server could not find the requested resource") {
			t.Fatalf("unserved version: want upstream's 404, got %v", err)
		}
		_, err = pools.Patch(ctx, "p1", types.StrategicMergePatchType, []byte(`{"spec":{"size":"m"}}`), metav1.PatchOptions{})
		want := "accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
		if !apierrors.IsUnsupportedMediaType(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("strategic merge patch on a custom resource: want 415 %q, got %v", want, err)
		}
	})
}

// restClient is a client for raw requests against cfg's server.
func restClient(t *testing.T, cfg *rest.Config) *rest.RESTClient {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// warningRecorder is a rest.WarningHandler calling f with each warning's text.
type warningRecorder func(msg string)

func (f warningRecorder) HandleWarningHeader(code int, agent, msg string) { f(msg) }
