package openapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	protomodels "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

const (
	acceptProto    = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	acceptProtoNew = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// widgetSchema is a CRD-like structural schema, as a CRD's openAPIV3Schema gives it.
func widgetSchema() *spec.Schema {
	size := spec.Int64Property()
	size.Nullable = true
	return &spec.Schema{SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{
			"metadata": {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}},
			"spec": {SchemaProps: spec.SchemaProps{
				Type:        spec.StringOrArray{"object"},
				Description: "Desired state of the widget.",
				Properties: map[string]spec.Schema{
					"color": *spec.StringProperty().WithDescription("Color of the widget."),
					"size":  *size,
					"port": {
						VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-int-or-string": true}},
						SchemaProps: spec.SchemaProps{AnyOf: []spec.Schema{
							*spec.Int64Property(), *spec.StringProperty(),
						}},
					},
				},
			}},
			"status": {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}},
		},
	}}
}

func testKinds() []*registry.Kind {
	return []*registry.Kind{
		{
			Version: "v1", Kind: "ConfigMap", ListKind: "ConfigMapList",
			Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true,
			NewTyped:   func() runtime.Object { return &corev1.ConfigMap{} },
			SchemaFunc: func() *spec.Schema { return registry.SchemaOf(&corev1.ConfigMap{}) },
			SchemaName: "io.k8s.api.core.v1.ConfigMap",
		},
		{
			Group: "example.com", Version: "v1", Kind: "Widget", ListKind: "WidgetList",
			Resource: "widgets", Singular: "widget", Namespaced: true, Status: true,
			Scale:  &registry.Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size"},
			Schema: widgetSchema(),
		},
		{
			// No schema at all, cluster-scoped, and narrowed verbs.
			Group: "example.com", Version: "v1alpha1", Kind: "Gizmo", ListKind: "GizmoList",
			Resource: "gizmos", Singular: "gizmo", Verbs: []string{"get", "list", "watch", "patch"},
		},
	}
}

func newRegistry(kinds ...*registry.Kind) *registry.Registry {
	reg := registry.New()
	for _, k := range kinds {
		reg.Add(k)
	}
	return reg
}

func get(t testing.TB, h http.Handler, path, accept string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func gvkOf(ext map[string]any) []string {
	var out []string
	var list []any
	switch v := ext[extGVK].(type) {
	case []any:
		list = v
	case map[string]any:
		list = []any{v}
	}
	for _, e := range list {
		m, _ := e.(map[string]any)
		out = append(out, fmt.Sprintf("%v/%v/%v", m["group"], m["version"], m["kind"]))
	}
	return out
}

func TestV2JSON(t *testing.T) {
	h := New(newRegistry(testKinds()...))
	resp := get(t, h, "/openapi/v2", "application/json")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Etag") == "" {
		t.Fatalf("GET /openapi/v2: %d %q etag %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Etag"))
	}
	body, _ := io.ReadAll(resp.Body)
	var sw spec.Swagger
	if err := json.Unmarshal(body, &sw); err != nil {
		t.Fatal(err)
	}
	for name, gvk := range map[string]string{
		"io.k8s.api.core.v1.ConfigMap":     "/v1/ConfigMap",
		"io.k8s.api.core.v1.ConfigMapList": "/v1/ConfigMapList",
		"com.example.v1.Widget":            "example.com/v1/Widget",
		"com.example.v1.WidgetList":        "example.com/v1/WidgetList",
		"com.example.v1alpha1.Gizmo":       "example.com/v1alpha1/Gizmo",
	} {
		d, ok := sw.Definitions[name]
		if !ok {
			t.Errorf("definition %s missing", name)
			continue
		}
		if got := gvkOf(d.Extensions); !slices.Equal(got, []string{gvk}) {
			t.Errorf("%s GVK = %v, want %s", name, got, gvk)
		}
	}
	for _, name := range []string{objectMetaName, listMetaName, statusName, deleteOptsName, patchName, watchEventName, scaleName} {
		if _, ok := sw.Definitions[name]; !ok {
			t.Errorf("shared definition %s missing", name)
		}
	}
	if md := sw.Definitions["com.example.v1.Widget"].Properties["metadata"]; refName(md.Ref) != objectMetaName {
		t.Errorf("Widget metadata = %+v, want $ref ObjectMeta", md)
	}

	cm := sw.Paths.Paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]
	wd := sw.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]
	if cm.Patch == nil || wd.Patch == nil {
		t.Fatalf("patch operations missing: %v", slices.Sorted(mapsKeys(sw.Paths.Paths)))
	}
	if !slices.Contains(cm.Patch.Consumes, "application/strategic-merge-patch+json") {
		t.Errorf("built-in patch consumes %v", cm.Patch.Consumes)
	}
	if slices.Contains(wd.Patch.Consumes, "application/strategic-merge-patch+json") || !slices.Contains(wd.Patch.Consumes, "application/apply-patch+yaml") {
		t.Errorf("custom resource patch consumes %v", wd.Patch.Consumes)
	}
	if cm.Patch.ID != "patchCoreV1NamespacedConfigMap" || wd.Patch.ID != "patchExampleComV1NamespacedWidget" {
		t.Errorf("operation ids %s %s", cm.Patch.ID, wd.Patch.ID)
	}
	for _, p := range []string{
		"/api/v1/namespaces/{namespace}/configmaps", "/api/v1/configmaps", "/api/v1/watch/namespaces/{namespace}/configmaps/{name}",
		"/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status",
		"/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale",
		"/apis/example.com/v1alpha1/gizmos/{name}", "/apis/example.com/v1alpha1/gizmos",
	} {
		if _, ok := sw.Paths.Paths[p]; !ok {
			t.Errorf("path %s missing", p)
		}
	}
	gz := sw.Paths.Paths["/apis/example.com/v1alpha1/gizmos/{name}"]
	if gz.Get == nil || gz.Patch == nil || gz.Put != nil || gz.Delete != nil {
		t.Errorf("gizmo operations do not follow its verbs: %+v", gz.PathItemProps)
	}
	if _, ok := sw.Paths.Paths["/apis/example.com/v1alpha1/gizmos"].Post, true; ok && sw.Paths.Paths["/apis/example.com/v1alpha1/gizmos"].Post != nil {
		t.Errorf("gizmo create published")
	}
	scale := sw.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale"]
	if got := gvkOf(scale.Get.Extensions); !slices.Equal(got, []string{"autoscaling/v1/Scale"}) {
		t.Errorf("scale GVK %v", got)
	}

	// What Swagger 2.0 cannot say is gone; what it can stays.
	raw := string(body)
	for _, bad := range []string{`"nullable"`, `"anyOf"`} {
		if strings.Contains(raw, bad) {
			t.Errorf("v2 document contains %s", bad)
		}
	}

	// The JSON is a valid gnostic document.
	if _, err := openapi_v2.ParseDocument(body); err != nil {
		t.Fatal(err)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// protoModels fetches /openapi/v2 as protobuf and parses it the way kubectl 1.27 does for
// explain and validation.
func protoModels(t *testing.T, h http.Handler, accept string) protomodels.Models {
	t.Helper()
	resp := get(t, h, "/openapi/v2", accept)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != acceptProtoNew {
		t.Fatalf("GET /openapi/v2 Accept %s: %d %q", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, _ := io.ReadAll(resp.Body)
	var doc openapi_v2.Document
	if err := proto.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	models, err := protomodels.NewOpenAPIData(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return models
}

func TestV2ProtobufModelsAndValidation(t *testing.T) {
	h := New(newRegistry(testKinds()...))
	for _, accept := range []string{acceptProto, acceptProtoNew + ", application/json"} {
		models := protoModels(t, h, accept)
		cm := models.LookupModel("io.k8s.api.core.v1.ConfigMap")
		if cm == nil {
			t.Fatal("ConfigMap model missing")
		}
		// explain configmap.data
		kind, ok := cm.(*protomodels.Kind)
		if !ok || kind.Fields["data"] == nil {
			t.Fatalf("ConfigMap model %T has no data field", cm)
		}

		// kubectl 1.27 client-side validation.
		valid := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}, "data": map[string]any{"a": "b"}}
		if errs := validation.ValidateModel(valid, cm, "ConfigMap"); len(errs) != 0 {
			t.Errorf("valid ConfigMap: %v", errs)
		}
		invalid := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "bogus": 1}, "dta": map[string]any{}}
		errs := validation.ValidateModel(invalid, cm, "ConfigMap")
		if len(errs) != 2 {
			t.Errorf("invalid ConfigMap: %v, want unknown fields dta and metadata.bogus", errs)
		}
		widget := models.LookupModel("com.example.v1.Widget")
		w := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
			"spec": map[string]any{"color": "red", "size": 3, "port": "http"}}
		if errs := validation.ValidateModel(w, widget, "Widget"); len(errs) != 0 {
			t.Errorf("valid Widget: %v", errs)
		}
	}

	// ETag and If-None-Match.
	resp := get(t, h, "/openapi/v2", acceptProto)
	req := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
	req.Header.Set("Accept", acceptProto)
	req.Header.Set("If-None-Match", resp.Header.Get("Etag"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", rec.Code)
	}
}

func TestClientGo(t *testing.T) {
	reg := newRegistry(testKinds()...)
	srv := httptest.NewTLSServer(New(reg))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	cfg.TLSClientConfig.Insecure = true
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// v2 through the discovery client (protobuf).
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.GetDefinitions().GetAdditionalProperties()) == 0 {
		t.Fatal("no definitions in v2")
	}

	// v3 index and documents through the openapi3 root, as kubectl explain does.
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.GroupVersion{{Version: "v1"}, {Group: "example.com", Version: "v1"}, {Group: "example.com", Version: "v1alpha1"}}
	for _, gv := range want {
		if !slices.Contains(gvs, gv) {
			t.Errorf("v3 index %v lacks %v", gvs, gv)
		}
	}
	checkV3(t, root, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "io.k8s.api.core.v1.ConfigMap",
		"/api/v1/namespaces/{namespace}/configmaps/{name}", true)
	checkV3(t, root, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "com.example.v1.Widget",
		"/apis/example.com/v1/namespaces/{namespace}/widgets/{name}", false)

	// A new group-version shows up in the index, with its own hash.
	paths1, _ := dc.OpenAPIV3().Paths()
	reg.Add(&registry.Kind{Group: "new.example.org", Version: "v2", Kind: "Thing", ListKind: "ThingList",
		Resource: "things", Singular: "thing"})
	paths2, err := dc.OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := paths2["apis/new.example.org/v2"]; !ok || len(paths2) != len(paths1)+1 {
		t.Errorf("index after adding a kind: %v", slices.Sorted(mapsKeys(paths2)))
	}
	if _, err := root.GVSpec(schema.GroupVersion{Group: "new.example.org", Version: "v2"}); err != nil {
		t.Error(err)
	}
}

func checkV3(t *testing.T, root openapi3.Root, gvk schema.GroupVersionKind, defName, itemPath string, builtin bool) {
	t.Helper()
	doc, err := root.GVSpec(gvk.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	d := doc.Components.Schemas[defName]
	if d == nil {
		t.Fatalf("%s: no schema %s", gvk, defName)
	}
	want := fmt.Sprintf("%s/%s/%s", gvk.Group, gvk.Version, gvk.Kind)
	if got := gvkOf(d.Extensions); !slices.Equal(got, []string{want}) {
		t.Errorf("%s GVK = %v", defName, got)
	}
	if _, ok := doc.Components.Schemas[objectMetaName]; !ok {
		t.Errorf("%s: ObjectMeta missing", gvk.GroupVersion())
	}
	// Every $ref resolves within the document.
	raw, _ := json.Marshal(doc)
	for _, m := range strings.Split(string(raw), `"$ref":"#/components/schemas/`)[1:] {
		name := m[:strings.IndexByte(m, '"')]
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("%s: dangling $ref %s", gvk.GroupVersion(), name)
		}
	}
	// kubectl 1.33 detects server-side field validation from the PATCH operation.
	p := doc.Paths.Paths[itemPath]
	if p == nil || p.Patch == nil {
		t.Fatalf("%s: no PATCH at %s", gvk, itemPath)
	}
	if got := gvkOf(p.Patch.Extensions); !slices.Equal(got, []string{want}) {
		t.Errorf("PATCH GVK %v", got)
	}
	if !slices.ContainsFunc(p.Patch.Parameters, func(prm *spec3.Parameter) bool {
		return prm.Name == "fieldValidation" && prm.In == "query"
	}) {
		t.Errorf("%s: PATCH lacks fieldValidation", gvk)
	}
	if p.Patch.RequestBody == nil {
		t.Fatalf("%s: PATCH has no request body", gvk)
	}
	_, smp := p.Patch.RequestBody.Content["application/strategic-merge-patch+json"]
	if smp != builtin {
		t.Errorf("%s: strategic merge patch listed = %v", gvk, smp)
	}
}

func TestV3HashCachingAndRedirect(t *testing.T) {
	h := New(newRegistry(testKinds()...))
	resp := get(t, h, "/openapi/v3", "application/json")
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("index Content-Type %q", resp.Header.Get("Content-Type"))
	}
	var index struct {
		Paths map[string]struct{ ServerRelativeURL string } `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&index); err != nil {
		t.Fatal(err)
	}
	u := index.Paths["api/v1"].ServerRelativeURL
	if !strings.HasPrefix(u, "/openapi/v3/api/v1?hash=") {
		t.Fatalf("api/v1 URL %q", u)
	}
	doc := get(t, h, u, "application/json")
	if doc.StatusCode != 200 || doc.Header.Get("Cache-Control") != "public, immutable" || doc.Header.Get("Expires") == "" {
		t.Errorf("hashed GET: %d %v", doc.StatusCode, doc.Header)
	}
	stale := get(t, h, "/openapi/v3/api/v1?hash=0123", "application/json")
	if stale.StatusCode != http.StatusMovedPermanently || stale.Header.Get("Location") != u {
		t.Errorf("stale hash: %d %q", stale.StatusCode, stale.Header.Get("Location"))
	}
	if nf := get(t, h, "/openapi/v3/apis/nope/v1", "application/json"); nf.StatusCode != 404 || nf.Header.Get("Content-Type") != "application/json" {
		t.Errorf("unknown group-version: %d %q", nf.StatusCode, nf.Header.Get("Content-Type"))
	}
	if nf := get(t, h, "/openapi/v4", ""); nf.StatusCode != 404 {
		t.Errorf("/openapi/v4: %d", nf.StatusCode)
	}
}

// syntheticKinds returns n CRD-like kinds with small structural schemas, 10 per group.
func syntheticKinds(n int) []*registry.Kind {
	out := make([]*registry.Kind, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, &registry.Kind{
			Group: fmt.Sprintf("g%d.example.com", i/10), Version: "v1",
			Kind: fmt.Sprintf("Thing%d", i), ListKind: fmt.Sprintf("Thing%dList", i),
			Resource: fmt.Sprintf("things%d", i), Singular: fmt.Sprintf("thing%d", i),
			Namespaced: true, Status: true, Schema: widgetSchema(),
		})
	}
	return out
}

// BenchmarkRebuild5000 measures building the documents for 5,000 kinds from scratch.
func BenchmarkRebuild5000(b *testing.B) {
	reg := newRegistry(syntheticKinds(5000)...)
	b.ReportAllocs()
	for b.Loop() {
		h := New(reg)
		h.current()
	}
}

// BenchmarkAddOneKind5000 measures the rebuild after one CRD is added to 5,000: only the
// new kind's part and its group-version's v3 document are built.
func BenchmarkAddOneKind5000(b *testing.B) {
	reg := newRegistry(syntheticKinds(5000)...)
	h := New(reg)
	h.current()
	extra := syntheticKinds(1)[0]
	extra.Group = "extra.example.com"
	b.ReportAllocs()
	for b.Loop() {
		reg.Add(extra)
		h.current()
		reg.Remove(extra.GVR())
		h.current()
	}
}

// BenchmarkServeV2JSON5000 and BenchmarkServeV2Proto5000 measure the first request after a
// change: the v2 document's encoding.
func BenchmarkServeV2JSON5000(b *testing.B)  { benchServeV2(b, "application/json") }
func BenchmarkServeV2Proto5000(b *testing.B) { benchServeV2(b, acceptProto) }

func benchServeV2(b *testing.B, accept string) {
	reg := newRegistry(syntheticKinds(5000)...)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		h := New(reg)
		resp := get(b, h, "/openapi/v2", accept)
		n, _ := io.Copy(io.Discard, resp.Body)
		size = int(n)
	}
	b.ReportMetric(float64(size), "bytes/doc")
}

// BenchmarkServeV3Index5000 measures the first /openapi/v3 index request, which encodes and
// hashes every group-version document.
func BenchmarkServeV3Index5000(b *testing.B) {
	reg := newRegistry(syntheticKinds(5000)...)
	b.ReportAllocs()
	for b.Loop() {
		h := New(reg)
		get(b, h, "/openapi/v3", "application/json")
	}
}

func TestBuiltins(t *testing.T) {
	h := New(newRegistry(registry.Builtins()...))
	models := protoModels(t, h, acceptProto)
	srv := httptest.NewServer(h)
	defer srv.Close()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	root := openapi3.NewRoot(dc.OpenAPIV3())
	for _, k := range registry.Builtins() {
		name, _ := definitionNames(k)
		if models.LookupModel(name) == nil {
			t.Errorf("%s: no v2 model %s", k.GVR(), name)
		}
		path := "/api/" + k.Version + "/"
		if k.Group != "" {
			path = "/apis/" + k.Group + "/" + k.Version + "/"
		}
		if k.Namespaced {
			path += "namespaces/{namespace}/"
		}
		if !k.Supports("get") {
			continue // computed kinds (access reviews) are create-only: no item path
		}
		checkV3(t, root, k.GVK(), name, path+k.Resource+"/{name}", true)
	}
}

// TestConcurrentChange reads the documents while the registry changes (run with -race).
func TestConcurrentChange(t *testing.T) {
	reg := newRegistry(testKinds()...)
	h := New(reg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			k := syntheticKinds(1)[0]
			reg.Add(k)
			reg.Remove(k.GVR())
		}
	}()
	var wg sync.WaitGroup
	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/apis/example.com/v1"} {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if resp := get(t, h, path, "application/json"); resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %d", path, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
}
